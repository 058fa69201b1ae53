# Storage probe tests (loader_probe.c): bounds, errors, scratch clean-up, this machine's
# figures, and (where cgroup v1 blkio is writable) a throttled disk.
hdmlp_add_test(NAME test_probe
  SOURCES test_probe.c support/testds.c
  LIBS m
  TIMEOUT 180)
