# The packing library's units (packer/), included from tests/CMakeLists.txt. The packer's
# behaviour as users see it is tested through hdmlp-pack (tests/cli/).
hdmlp_add_test(NAME test_pack_order
  SOURCES packer/test_pack_order.c
  LIBS hdmlp_packer
  TIMEOUT 60)
set_tests_properties(test_pack_order PROPERTIES LABELS "packer")
