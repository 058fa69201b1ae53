# The distributed protocol over the in-process transport (no network).
hdmlp_add_test(NAME test_distributed
  SOURCES test_distributed.c support/testds.c support/fakenet.c
  TIMEOUT 300)
