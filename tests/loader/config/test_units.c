/* units_parse_size: the size grammar shared by hdmlp-bench, hdmlp-pack and the Python
 * module (loader/config/loader_units.c, compiled into each). */
#include "loader_units.h"

#include <criterion/criterion.h>
#include <string.h>

#define SENTINEL 0x5a5a5a5a5a5a5a5aULL

/* The last parse's message. */
static char detail[512];

/* units_parse_size with its message in `detail`. */
static int parse(const char *text, uint64_t percent_of, uint64_t *bytes, double *percent)
{
    detail[0] = '\0';
    return units_parse_size(text, percent_of, bytes, percent, detail, sizeof detail);
}

/* text parses, without percentages, to want. */
static void expect_bytes(const char *text, uint64_t want)
{
    uint64_t got = SENTINEL;
    const int rc = parse(text, 0, &got, NULL);
    cr_expect_eq(rc, 0, "'%s': %s", text, detail);
    cr_expect_eq(got, want, "'%s': %llu, expected %llu", text, (unsigned long long)got,
                 (unsigned long long)want);
}

/* text is refused with a detail naming it, *bytes and *percent untouched. */
static void expect_invalid(const char *text, uint64_t percent_of)
{
    uint64_t got = SENTINEL;
    double percent = -1;
    cr_expect_eq(parse(text, percent_of, &got, NULL), -1, "'%s' was accepted as %llu", text,
                 (unsigned long long)got);
    cr_expect_eq(got, SENTINEL, "'%s': *bytes changed on failure", text);
    cr_expect(strstr(detail, text) != NULL, "'%s': detail '%s' does not name it", text, detail);
    cr_expect_eq(parse(text, percent_of, &got, &percent), -1,
                 "'%s' was accepted with a percent out-parameter", text);
    cr_expect_eq(percent, -1, "'%s': *percent changed on failure", text);
}

Test(units, plain_bytes)
{
    expect_bytes("0", 0);
    expect_bytes("123456", 123456);
    expect_bytes("42B", 42);
    expect_bytes("42b", 42);
    expect_bytes("007", 7);
    expect_bytes("18446744073709551615", UINT64_MAX);
}

Test(units, binary_units_any_case)
{
    expect_bytes("2k", 2048);
    expect_bytes("3K", 3072);
    expect_bytes("3KiB", 3072);
    expect_bytes("3kib", 3072);
    expect_bytes("256M", 256ULL << 20);
    expect_bytes("256MIB", 256ULL << 20);
    expect_bytes("4g", 4ULL << 30);
    expect_bytes("4GiB", 4ULL << 30);
    expect_bytes("2T", 2ULL << 40);
    expect_bytes("2tib", 2ULL << 40);
}

Test(units, decimal_units_any_case)
{
    expect_bytes("1KB", 1000);
    expect_bytes("1kb", 1000);
    expect_bytes("500MB", 500000000);
    expect_bytes("2GB", 2000000000);
    expect_bytes("3Tb", 3000000000000ULL);
}

Test(units, fractions_round_down)
{
    expect_bytes("1.5GiB", 3ULL << 29);
    expect_bytes("1.5", 1);
    expect_bytes(".5K", 512);
    expect_bytes("5.", 5);
    expect_bytes("0.1K", 102);
    expect_bytes("1.0005KB", 1000);
    expect_bytes("4.35MB", 4350000);
    expect_bytes("0.29KB", 290);
    expect_bytes("0.999999999999999999999999K", 1023);
    expect_bytes("18446744073709551615.99", UINT64_MAX);
}

Test(units, exponents)
{
    expect_bytes("4e9", 4000000000ULL);
    expect_bytes("2E+2", 200);
    expect_bytes("1.5e3K", 1536000);
    expect_bytes("1e-3K", 1);
    expect_bytes("25e-1MB", 2500000);
    expect_bytes("0e999999999999999", 0);
    expect_bytes("1e-999999999999999T", 0);
}

Test(units, blanks_around_number_and_unit)
{
    expect_bytes(" 42", 42);
    expect_bytes("42 ", 42);
    expect_bytes("1.5 GiB", 3ULL << 29);
    expect_bytes("\t2k\n", 2048);
}

Test(units, percent_of_a_total)
{
    uint64_t got = SENTINEL;
    double percent = -1;
    cr_assert_eq(parse("25%", 1000, &got, NULL), 0);
    cr_expect_eq(got, 250);
    cr_assert_eq(parse(" 12.5 % ", 1000, &got, &percent), 0);
    cr_expect_eq(got, 125);
    cr_expect_eq(percent, 12.5);
    cr_assert_eq(parse("33%", 10, &got, NULL), 0);
    cr_expect_eq(got, 3, "rounded down: %llu", (unsigned long long)got);
    cr_assert_eq(parse("200%", 3, &got, NULL), 0);
    cr_expect_eq(got, 6);
    cr_assert_eq(parse("100%", UINT64_MAX, &got, NULL), 0);
    cr_expect_eq(got, UINT64_MAX);
    cr_assert_eq(parse("2.5e1%", 1000, &got, NULL), 0);
    cr_expect_eq(got, 250);
}

Test(units, percent_kept_for_later_when_total_unknown)
{
    uint64_t got = SENTINEL;
    double percent = -1;
    cr_assert_eq(parse("25%", 0, &got, &percent), 0);
    cr_expect_eq(got, 0);
    cr_expect_eq(percent, 25.0);
    cr_assert_eq(parse("0.5%", 0, &got, &percent), 0);
    cr_expect_eq(percent, 0.5);
    cr_assert_eq(parse("64M", 0, &got, &percent), 0);
    cr_expect_eq(got, 64ULL << 20);
    cr_expect_eq(percent, 0.0, "a plain size sets *percent to 0");
}

Test(units, percent_refused_without_total_or_out_parameter)
{
    uint64_t got = SENTINEL;
    cr_expect_eq(parse("25%", 0, &got, NULL), -1);
    cr_expect_eq(got, SENTINEL);
    cr_expect(strstr(detail, "25%") != NULL, "detail: %s", detail);
}

Test(units, malformed_rejected)
{
    const char *bad[] = {"",    " ",    "abc",   "-5M",   "+5",   "12X",  "%",  "0%",  "0.0%",
                         ".",   "1..5", "1.5.",  "0x10",  "inf",  "nan",  "1e", "1e+", "K",
                         "1 2", "1KK",  "1 K B", "1e3e3", "5 %%", "1,5K", "1E"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        expect_invalid(bad[i], 1000);
    }
}

Test(units, overflow_rejected_not_wrapped)
{
    const char *big[] = {"1e30",
                         "99999999T",
                         "18446744073709551616",
                         "18446744073709551615.99K",
                         "16777216T",
                         "17179869184G",
                         "18446744073709551616B",
                         "1e20",
                         "1e999999999999999",
                         "100000000000000000000000000000000000000000"};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        expect_invalid(big[i], 0);
    }
    expect_invalid("200%", UINT64_MAX);
    expect_invalid("1e30%", 1000);
    expect_invalid("1e30%", 0); /* P / 100 itself is past 2^64 */
    expect_bytes("16777215.99999999999T", 18446744073709551605ULL);
}

Test(units, null_arguments)
{
    uint64_t got = SENTINEL;
    cr_expect_eq(parse(NULL, 0, &got, NULL), -1);
    cr_expect_eq(parse("1K", 0, NULL, NULL), -1);
    cr_expect_eq(got, SENTINEL);
}

Test(units, message_optional_and_bounded)
{
    uint64_t got = SENTINEL;
    cr_expect_eq(units_parse_size("12X", 0, &got, NULL, NULL, 0), -1, "no message buffer");
    char small[8];
    memset(small, '#', sizeof small);
    cr_expect_eq(units_parse_size("12X", 0, &got, NULL, small, sizeof small), -1);
    cr_expect_eq(small[sizeof small - 1], '\0', "message cut to the buffer");
    cr_expect_eq(got, SENTINEL);
}
