# The format's tests, included from tests/CMakeLists.txt (paths relative to tests/).
# ---- format and datasets (tests/support/testds.c writes the test datasets) --------------
hdmlp_add_test(NAME test_format
  SOURCES format/test_format.c format/test_format_chunk.c format/test_format_codec.c
          format/test_format_errors.c format/test_format_v2.c
          support/format_small.c support/testds.c
  TIMEOUT 120)
