/* format/: the error table (names and messages of every code, unknown codes) and error
 * detail. Part of the test_format binary. */
#include "format.h"

#include <criterion/criterion.h>
#include <string.h>

/* ---- errors --------------------------------------------------------------------------- */

Test(errors, names_and_messages_for_every_code)
{
    struct {
        int code;
        const char *name;
        const char *msg;
    } table[] = {
#define ROW(name, value, msg) {value, "HDMLP_" #name, msg},
        HDMLP_ERRNO_MAP(ROW)
#undef ROW
    };
    const size_t n = sizeof(table) / sizeof(table[0]);
    cr_assert_geq(n, 16);
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_eq(hdmlp_err_name(table[i].code), table[i].name);
        cr_assert_str_eq(hdmlp_strerror(table[i].code), table[i].msg);
        cr_assert_gt(strlen(table[i].msg), 0);
        cr_assert_str_neq(hdmlp_strerror(table[i].code), "unknown error");
        for (size_t j = 0; j < i; j++) {
            cr_assert_neq(table[i].code, table[j].code, "codes are unique");
        }
    }
    cr_assert_str_eq(hdmlp_err_name(HDMLP_E_CORRUPT), "HDMLP_E_CORRUPT");
    cr_assert_str_eq(hdmlp_strerror(HDMLP_E_VERSION), "unsupported format version");
    cr_assert_eq(HDMLP_E_NOTFOUND, -6);
}

Test(errors, unknown_code)
{
    cr_assert_str_eq(hdmlp_strerror(-1000), "unknown error");
    cr_assert_str_eq(hdmlp_err_name(-1000), "HDMLP_E_UNKNOWN");
    cr_assert_str_eq(hdmlp_strerror(2), "unknown error");
}

Test(errors, detail_and_wrap)
{
    hd_clear_error();
    cr_assert_str_eq(hdmlp_last_error(), "");
    cr_assert_eq(hd_err(HDMLP_E_CORRUPT, "sample %d: bad", 5), HDMLP_E_CORRUPT);
    cr_assert_str_eq(hdmlp_last_error(), "sample 5: bad");
    cr_assert_eq(hd_err_wrap(HDMLP_E_CORRUPT, "%s: ", "seg"), HDMLP_E_CORRUPT);
    cr_assert_str_eq(hdmlp_last_error(), "seg: sample 5: bad");
}
