# I/O engine tests (loader_io.c, loader_io_uring.c); io_uring cases skip without io_uring.
hdmlp_add_test(NAME test_io
  SOURCES test_io.c
  TIMEOUT 60)
