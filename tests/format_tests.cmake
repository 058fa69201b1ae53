# Format and dataset tests (tests/support/testds.c writes the test datasets).
hdmlp_add_test(NAME test_format
  SOURCES test_format.c support/testds.c
  TIMEOUT 120)
hdmlp_add_test(NAME test_dataset
  SOURCES test_dataset.c support/testds.c
  TIMEOUT 300)
