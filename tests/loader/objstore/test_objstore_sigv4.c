/*
 * Object-store sources without a network: SigV4 against AWS's published test vectors,
 * dataset URLs into object URLs (path and virtual-hosted style), the source config's
 * setters and the AWS environment / ~/.aws files.
 */
#include "hdmlp.h"
#include "loader_source.h"
#include "loader_source_sigv4.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const EMPTY_SHA =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

static void sign_suite(const char *query, const char *want)
{
    const sigv4_header h[] = {{"x-amz-date", "20150830T123600Z"},
                              {"host", "example.amazonaws.com"}};
    const sigv4_request r = {"GET",
                             "/",
                             query,
                             h,
                             2,
                             EMPTY_SHA,
                             "20150830T123600Z",
                             "us-east-1",
                             "service",
                             "AKIDEXAMPLE",
                             "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"};
    char auth[512];
    cr_assert_eq(sigv4_authorization(&r, auth, sizeof(auth), NULL), 0);
    char full[512];
    snprintf(full, sizeof(full),
             "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
             "SignedHeaders=host;x-amz-date, Signature=%s",
             want);
    cr_assert_str_eq(auth, full);
}

/* aws-sig-v4-test-suite: get-vanilla. */
Test(sigv4, get_vanilla)
{
    sign_suite("", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

/* aws-sig-v4-test-suite: get-vanilla-query-order-key-case (the query sorted by the caller). */
Test(sigv4, get_vanilla_query_order)
{
    sign_suite("Param1=value1&Param2=value2",
               "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

/* The S3 documentation's GetObject example (a signed Range header). */
Test(sigv4, s3_get_object_example)
{
    const sigv4_header h[] = {{"range", "bytes=0-9"},
                              {"host", "examplebucket.s3.amazonaws.com"},
                              {"x-amz-date", "20130524T000000Z"},
                              {"x-amz-content-sha256", EMPTY_SHA}};
    const sigv4_request r = {"GET",
                             "/test.txt",
                             "",
                             h,
                             4,
                             EMPTY_SHA,
                             "20130524T000000Z",
                             "us-east-1",
                             "s3",
                             "AKIAIOSFODNN7EXAMPLE",
                             "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};
    char auth[512];
    char canon[65];
    cr_assert_eq(sigv4_authorization(&r, auth, sizeof(auth), canon), 0);
    /* The documented canonical request's hash (the string to sign's third line). */
    cr_assert_str_eq(canon, "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
    cr_assert(strstr(auth, "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, ") !=
                  NULL,
              "%s", auth);
    cr_assert(strstr(auth, "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c60"
                           "36bdb41") != NULL,
              "%s", auth);
    /* A different secret gives a different signature; a short buffer is refused. */
    sigv4_request bad = r;
    bad.secret_key = "wrong";
    char other[512];
    cr_assert_eq(sigv4_authorization(&bad, other, sizeof(other), NULL), 0);
    cr_assert_str_neq(auth, other);
    cr_assert_eq(sigv4_authorization(&r, other, 40, NULL), -1);
    bad = r;
    bad.amz_date = "2013";
    cr_assert_eq(sigv4_authorization(&bad, other, sizeof(other), NULL), -1);
}

Test(sigv4, uri_encode)
{
    char out[64];
    cr_assert_eq(sigv4_uri_encode("a b/c~d", 7, 1, out, sizeof(out)), 9);
    cr_assert_str_eq(out, "a%20b/c~d");
    cr_assert_eq(sigv4_uri_encode("a/b", 3, 0, out, sizeof(out)), 5);
    cr_assert_str_eq(out, "a%2Fb");
    cr_assert_eq(sigv4_uri_encode("abcdef", 6, 1, out, 4), -1);
}

static void object_url(const char *dataset, const hdmlp_source_config *cfg, const char *object,
                       const char *want_url, const char *want_host)
{
    src_store *s = NULL;
    cr_assert_eq(src_store_open(dataset, cfg, &s), HDMLP_OK, "%s: %s", dataset,
                 hdmlp_last_error());
    char url[512];
    cr_assert_eq(src_object_url(s, object, url, sizeof(url)), 0);
    cr_assert_str_eq(url, want_url);
    cr_assert_str_eq(s->host, want_host);
    src_store_free(s);
}

Test(source, urls)
{
    object_url("http://127.0.0.1:8080/data/set/", NULL, "index",
               "http://127.0.0.1:8080/data/set/index", "127.0.0.1:8080");
    object_url("https://localhost/ds", NULL, "segment-000001",
               "https://localhost/ds/segment-000001", "localhost");
    object_url("http://h", NULL, "index", "http://h/index", "h");
    hdmlp_source_config *cfg = NULL;
    cr_assert_eq(hdmlp_source_config_create(&cfg), HDMLP_OK);
    /* AWS's endpoint: virtual-hosted style in the region. */
    cr_assert_eq(hdmlp_source_config_set_region(cfg, "eu-west-1"), HDMLP_OK);
    object_url("s3://bucket/pre fix/ds", cfg, "index",
               "https://bucket.s3.eu-west-1.amazonaws.com/pre%20fix/ds/index",
               "bucket.s3.eu-west-1.amazonaws.com");
    /* A custom endpoint: path style unless told otherwise. */
    cr_assert_eq(hdmlp_source_config_set_endpoint(cfg, "http://127.0.0.1:9000/"), HDMLP_OK);
    object_url("s3://bucket/ds/", cfg, "segment-000000",
               "http://127.0.0.1:9000/bucket/ds/segment-000000", "127.0.0.1:9000");
    object_url("s3://bucket", cfg, "index", "http://127.0.0.1:9000/bucket/index",
               "127.0.0.1:9000");
    cr_assert_eq(hdmlp_source_config_set_path_style(cfg, 0), HDMLP_OK);
    object_url("s3://bucket/ds", cfg, "index", "http://bucket.127.0.0.1:9000/ds/index",
               "bucket.127.0.0.1:9000");
    hdmlp_source_config_free(cfg);

    const char *bad[] = {"ftp://x/y", "s3://",      "s3://bu/cket?x", "http://user@h/x",
                         "http:///x", "s3://b*d/x", "http://h/a?b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        src_store *s = NULL;
        cr_assert_eq(src_store_open(bad[i], NULL, &s), HDMLP_E_INVAL, "%s", bad[i]);
        cr_assert_null(s);
        cr_assert(strstr(hdmlp_last_error(), bad[i]) != NULL, "%s", hdmlp_last_error());
    }
}

/* The Host signed is the Host libcurl sends: no scheme-default port, the name in lower case
 * (botocore's rule); other ports and IPv6 literals as written. */
Test(source, host_as_sent)
{
    object_url("http://Example.COM:80/ds", NULL, "index", "http://example.com/ds/index",
               "example.com");
    object_url("https://h:443/ds", NULL, "index", "https://h/ds/index", "h");
    object_url("http://h:443/ds", NULL, "index", "http://h:443/ds/index", "h:443");
    object_url("https://h:80/ds", NULL, "index", "https://h:80/ds/index", "h:80");
    object_url("http://[::1]:80/ds", NULL, "index", "http://[::1]/ds/index", "[::1]");
    object_url("http://[::1]:8080/ds", NULL, "index", "http://[::1]:8080/ds/index",
               "[::1]:8080");
    object_url("http://h:/ds", NULL, "index", "http://h/ds/index", "h");
    hdmlp_source_config *cfg = NULL;
    cr_assert_eq(hdmlp_source_config_create(&cfg), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_endpoint(cfg, "http://127.0.0.1:80"), HDMLP_OK);
    object_url("s3://bucket/ds", cfg, "index", "http://127.0.0.1/bucket/ds/index", "127.0.0.1");
    cr_assert_eq(hdmlp_source_config_set_endpoint(cfg, "https://LOCALHOST:443/"), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_path_style(cfg, 0), HDMLP_OK);
    object_url("s3://bucket/ds", cfg, "index", "https://bucket.localhost/ds/index",
               "bucket.localhost");
    hdmlp_source_config_free(cfg);
    src_store *s = NULL;
    cr_assert_eq(src_store_open("http://h:8x/ds", NULL, &s), HDMLP_E_INVAL);
    cr_assert_null(s);
}

/* S3 keys are literal: dot segments stay in the URL and in the path signed. */
Test(source, dot_segments_are_literal)
{
    hdmlp_source_config *cfg = NULL;
    cr_assert_eq(hdmlp_source_config_create(&cfg), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_endpoint(cfg, "http://127.0.0.1:9000"), HDMLP_OK);
    object_url("s3://b/x/../y", cfg, "index", "http://127.0.0.1:9000/b/x/../y/index",
               "127.0.0.1:9000");
    object_url("s3://b/y/./set/", cfg, "segment-000000",
               "http://127.0.0.1:9000/b/y/./set/segment-000000", "127.0.0.1:9000");
    src_store *s = NULL;
    cr_assert_eq(src_store_open("s3://b/x/../y", cfg, &s), HDMLP_OK);
    char path[256];
    cr_assert_eq(src_object_path(s, "index", path, sizeof(path)), 0);
    cr_assert_str_eq(path, "/b/x/../y/index");
    src_store_free(s);
    hdmlp_source_config_free(cfg);
}

/* AWS's endpoint: virtual-hosted style only for buckets that are host name labels; a
 * dotted (or upper-case, or short) name goes path style, as botocore does; an explicit
 * choice stands. */
Test(source, dotted_buckets_use_path_style_on_aws)
{
    hdmlp_source_config *cfg = NULL;
    cr_assert_eq(hdmlp_source_config_create(&cfg), HDMLP_OK);
    object_url("s3://my-bucket/ds", cfg, "index",
               "https://my-bucket.s3.us-east-1.amazonaws.com/ds/index",
               "my-bucket.s3.us-east-1.amazonaws.com");
    object_url("s3://my.data.bucket/ds", cfg, "index",
               "https://s3.us-east-1.amazonaws.com/my.data.bucket/ds/index",
               "s3.us-east-1.amazonaws.com");
    object_url("s3://MyBucket/ds", cfg, "index",
               "https://s3.us-east-1.amazonaws.com/MyBucket/ds/index",
               "s3.us-east-1.amazonaws.com");
    object_url("s3://ab/ds", cfg, "index", "https://s3.us-east-1.amazonaws.com/ab/ds/index",
               "s3.us-east-1.amazonaws.com");
    cr_assert_eq(hdmlp_source_config_set_path_style(cfg, 0), HDMLP_OK);
    object_url("s3://my.data.bucket/ds", cfg, "index",
               "https://my.data.bucket.s3.us-east-1.amazonaws.com/ds/index",
               "my.data.bucket.s3.us-east-1.amazonaws.com");
    hdmlp_source_config_free(cfg);
}

Test(source, config_setters)
{
    hdmlp_source_config *cfg = NULL;
    cr_assert_eq(hdmlp_source_config_create(NULL), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_source_config_create(&cfg), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_endpoint(cfg, "ftp://x"), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_source_config_set_region(cfg, ""), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_source_config_set_credentials(cfg, "AK", NULL, NULL), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_source_config_set_credentials(cfg, "", "s", NULL), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_source_config_set_credentials(cfg, "AK", "SK", "TOK"), HDMLP_OK);
    cr_assert_str_eq(cfg->session_token, "TOK");
    cr_assert_eq(hdmlp_source_config_set_credentials(cfg, NULL, NULL, NULL), HDMLP_OK);
    cr_assert_null(cfg->access_key);
    cr_assert_eq(hdmlp_source_config_set_path_style(cfg, 2), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_source_config_set_timeouts(cfg, 100, 999, 1000), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_source_config_set_timeouts(cfg, 100, 1000, 1000), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_retries(cfg, 21), HDMLP_E_INVAL);
    cr_assert_eq(hdmlp_source_config_set_retries(cfg, 0), HDMLP_OK);
    hdmlp_source_config_free(cfg);
    hdmlp_source_config_free(NULL);
    hdmlp_dataset *ds = (hdmlp_dataset *)1;
    cr_assert_eq(hdmlp_dataset_open_source("/not/a/url", NULL, &ds), HDMLP_E_INVAL);
    cr_assert_null(ds);
}

/* Environment first, then the profile's files; an access key without a secret fails. */
Test(source, aws_environment_and_files)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("aws", dir, sizeof(dir)), 0);
    char creds[600], conf[600];
    snprintf(creds, sizeof(creds), "%s/credentials", dir);
    snprintf(conf, sizeof(conf), "%s/config", dir);
    const char *c = "[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key=DS\n"
                    "[work]\naws_access_key_id=WORKKEY\naws_secret_access_key = WS\n"
                    "aws_session_token = WT\n";
    const char *f = "[default]\nregion = us-west-2\n[profile work]\nregion=eu-central-1\n"
                    "endpoint_url = http://127.0.0.1:9\n";
    cr_assert_eq(testds_write_file(creds, c, strlen(c)), 0);
    cr_assert_eq(testds_write_file(conf, f, strlen(f)), 0);
    const char *vars[] = {"AWS_ACCESS_KEY_ID",   "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                          "AWS_REGION",          "AWS_DEFAULT_REGION",    "AWS_ENDPOINT_URL",
                          "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",           "AWS_CA_BUNDLE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        unsetenv(vars[i]);
    }
    setenv("AWS_SHARED_CREDENTIALS_FILE", creds, 1);
    setenv("AWS_CONFIG_FILE", conf, 1);
    hdmlp_source_config *cfg = NULL;
    cr_assert_eq(hdmlp_source_config_create(&cfg), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_load_aws(cfg), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_str_eq(cfg->access_key, "DEFAULTKEY");
    cr_assert_str_eq(cfg->region, "us-west-2");
    cr_assert_null(cfg->endpoint);
    setenv("AWS_PROFILE", "work", 1);
    cr_assert_eq(hdmlp_source_config_load_aws(cfg), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_str_eq(cfg->access_key, "WORKKEY");
    cr_assert_str_eq(cfg->session_token, "WT");
    cr_assert_str_eq(cfg->region, "eu-central-1");
    cr_assert_str_eq(cfg->endpoint, "http://127.0.0.1:9");
    cr_assert_null(cfg->ca_file);
    setenv("AWS_CA_BUNDLE", "/some/ca.pem", 1);
    setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
    setenv("AWS_REGION", "ap-south-1", 1);
    cr_assert_eq(hdmlp_source_config_load_aws(cfg), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_str_eq(cfg->access_key, "ENVKEY");
    cr_assert_str_eq(cfg->secret_key, "ENVSECRET");
    cr_assert_str_eq(cfg->region, "ap-south-1");
    cr_assert_str_eq(cfg->ca_file, "/some/ca.pem");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    cr_assert_eq(hdmlp_source_config_load_aws(cfg), HDMLP_E_INVAL);
    cr_assert(strstr(hdmlp_last_error(), "secret") != NULL, "%s", hdmlp_last_error());
    hdmlp_source_config_free(cfg);
    testds_rm_rf(dir);
}
