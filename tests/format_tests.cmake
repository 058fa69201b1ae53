# tests for this module are registered here
