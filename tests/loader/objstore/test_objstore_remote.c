/*
 * The object-storage suite against an S3 server the suite did not write: run by
 * tests/objstore/rgw_suite.sh against Ceph's radosgw and against objstore_server.py, with
 * the server in the environment (HDMLP_S3_ENDPOINT, HDMLP_S3_VHOST_ENDPOINT,
 * HDMLP_S3_ACCESS_KEY, HDMLP_S3_SECRET_KEY, HDMLP_S3_BUCKET, HDMLP_S3_PORT80, HDMLP_S3_SERVER)
 * and the tools (HDMLP_PACK, HDMLP_AWS, HDMLP_PY, HDMLP_S3_TOOL). Datasets packed and
 * uploaded by hdmlp-pack read back byte for byte with botocore; datasets uploaded with
 * awscli read with hdmlp in the local copy's order; a multipart upload above 64 MiB; path
 * and virtual-hosted style; an endpoint naming port 80; prefixes with dot segments; a wrong
 * secret named as a signature mismatch. Without the environment every test fails saying so.
 */
#include "hdmlp.h"
#include "support/objstore_fixture.h"
#include "support/testds.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *need(const char *name)
{
    const char *v = getenv(name);
    cr_assert(v != NULL && v[0] != '\0',
              "%s is not set: this suite runs through tests/objstore/rgw_suite.sh", name);
    return v;
}

/* A source config for the server under test; endpoint NULL: HDMLP_S3_ENDPOINT. */
static hdmlp_source_config *remote_config(const char *endpoint, int path_style)
{
    hdmlp_source_config *c = NULL;
    cr_assert_eq(hdmlp_source_config_create(&c), HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_endpoint(
                     c, endpoint != NULL ? endpoint : need("HDMLP_S3_ENDPOINT")),
                 HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_credentials(c, need("HDMLP_S3_ACCESS_KEY"),
                                                     need("HDMLP_S3_SECRET_KEY"), NULL),
                 HDMLP_OK);
    cr_assert_eq(hdmlp_source_config_set_path_style(c, path_style), HDMLP_OK);
    return c;
}

static void url_of(char *buf, size_t cap, const char *prefix)
{
    snprintf(buf, cap, "s3://%s/%s", need("HDMLP_S3_BUCKET"), prefix);
}

/* A local root (ROOT/bucket/ds: the dataset of `spec`) as objstore_same_as_local wants. */
static void local_root(objstore_server *s, const testds_spec *spec)
{
    objstore_cur = spec;
    cr_assert_eq(testds_mkdtemp("remote", s->dir, sizeof(s->dir)), 0);
    char d[700];
    snprintf(d, sizeof(d), "%s/bucket", s->dir);
    cr_assert_eq(mkdir(d, 0755), 0);
    snprintf(d, sizeof(d), "%s/bucket/ds", s->dir);
    cr_assert_eq(testds_write(d, spec), HDMLP_OK, "%s", hdmlp_last_error());
}

static void run(const char *cmd)
{
    cr_log_info("$ %s", cmd);
    const int rc = system(cmd);
    cr_assert_eq(rc, 0, "failed (status %d): %s", rc, cmd);
}

/* The same environment for the command-line tools as for the library. */
static void aws_env(const char *dir)
{
    char conf[700];
    snprintf(conf, sizeof(conf), "%s/aws-config", dir);
    const char *text = "[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n";
    cr_assert_eq(testds_write_file(conf, text, strlen(text)), 0);
    setenv("AWS_CONFIG_FILE", conf, 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null", 1);
    unsetenv("AWS_PROFILE");
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_ENDPOINT_URL_S3");
    setenv("AWS_ACCESS_KEY_ID", need("HDMLP_S3_ACCESS_KEY"), 1);
    setenv("AWS_SECRET_ACCESS_KEY", need("HDMLP_S3_SECRET_KEY"), 1);
    setenv("AWS_ENDPOINT_URL", need("HDMLP_S3_ENDPOINT"), 1);
    setenv("AWS_REGION", "us-east-1", 1);
}

/* Opens `url` with c, drains 2 epochs and compares with the local copy under s. */
static void same_as_local(const objstore_server *s, const char *url, hdmlp_source_config *c)
{
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source(url, c, &ds), HDMLP_OK, "%s: %s", url,
                 hdmlp_last_error());
    objstore_same_as_local(s, ds, HDMLP_REFILL_AUTO);
    hdmlp_dataset_close(ds);
}

/* hdmlp-pack -o s3:// uploads what hdmlp-pack -o DIR writes, byte for byte (read back with
 * botocore), and the upload opens and verifies. */
Test(remote, pack_upload_reads_back_with_botocore, .timeout = 180)
{
    char dir[512];
    cr_assert_eq(testds_mkdtemp("remote-pack", dir, sizeof(dir)), 0);
    aws_env(dir);
    char in[600], path[700], cmd[4096];
    snprintf(in, sizeof(in), "%s/in", dir);
    cr_assert_eq(mkdir(in, 0755), 0);
    const char *labels[] = {"cat", "dog"};
    uint8_t buf[9000];
    for (int l = 0; l < 2; l++) {
        snprintf(path, sizeof(path), "%s/%s", in, labels[l]);
        cr_assert_eq(mkdir(path, 0755), 0);
        for (int i = 0; i < 150; i++) {
            const size_t n = (size_t)(i * 57 + l * 13) % sizeof(buf);
            testds_fill((uint64_t)(l * 1000 + i), 4242, buf, n);
            snprintf(path, sizeof(path), "%s/%s/f%03d", in, labels[l], i);
            cr_assert_eq(testds_write_file(path, buf, n), 0);
        }
    }
    /* The same seed and creation time: byte-identical packs (hdmlp-pack's contract). */
    setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
    char url[256];
    url_of(url, sizeof(url), "packed");
    snprintf(cmd, sizeof(cmd), "'%s' --seed 7 --chunk-size 16 -o '%s' '%s' >/dev/null",
             need("HDMLP_PACK"), url, in);
    run(cmd);
    snprintf(cmd, sizeof(cmd), "'%s' --seed 7 --chunk-size 16 -o '%s/local' '%s' >/dev/null",
             need("HDMLP_PACK"), dir, in);
    run(cmd);
    snprintf(cmd, sizeof(cmd), "'%s' '%s' same '%s' packed '%s/local'", need("HDMLP_PY"),
             need("HDMLP_S3_TOOL"), need("HDMLP_S3_BUCKET"), dir);
    run(cmd);
    hdmlp_source_config *c = remote_config(NULL, 1);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source(url, c, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_sample_count(ds), 300);
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    hdmlp_source_config_free(c);
    testds_rm_rf(dir);
}

/* A dataset uploaded with awscli reads with hdmlp in the local copy's order, in path and
 * virtual-hosted style, and at an endpoint naming port 80 where the server has it. */
Test(remote, awscli_upload_reads_with_hdmlp, .timeout = 180)
{
    objstore_server s = {0};
    local_root(&s, &objstore_spec);
    aws_env(s.dir);
    char cmd[4096], url[256];
    url_of(url, sizeof(url), "awsds");
    snprintf(cmd, sizeof(cmd),
             "'%s' s3 cp --recursive --only-show-errors --endpoint-url '%s' '%s/bucket/ds' "
             "'%s'",
             need("HDMLP_AWS"), need("HDMLP_S3_ENDPOINT"), s.dir, url);
    run(cmd);
    hdmlp_source_config *c = remote_config(NULL, 1);
    same_as_local(&s, url, c);
    hdmlp_source_config_free(c);
    c = remote_config(need("HDMLP_S3_VHOST_ENDPOINT"), 0);
    same_as_local(&s, url, c);
    hdmlp_source_config_free(c);
    if (strcmp(need("HDMLP_S3_PORT80"), "1") == 0) {
        c = remote_config("http://127.0.0.1:80", 1);
        same_as_local(&s, url, c);
        hdmlp_source_config_free(c);
    } else {
        cr_log_warn("%s does not serve 127.0.0.1:80 here (taken): the default-port endpoint "
                    "is checked by test_objstore only",
                    need("HDMLP_S3_SERVER"));
    }
    objstore_stop(&s);
    objstore_cur = &objstore_spec;
}

/* A segment above the default part size (64 MiB) goes as a multipart upload; botocore
 * reads it back byte for byte and hdmlp verifies it. */
Test(remote, multipart_above_64_mib, .timeout = 240)
{
    const testds_spec big = {.n_samples = 1100,
                             .chunk_size = 32,
                             .chunks_per_segment = 0,
                             .seed = 2411,
                             .min_size = 64000,
                             .max_size = 68000,
                             .compress = 0,
                             .n_labels = 2};
    objstore_server s = {0};
    local_root(&s, &big);
    char local[700], url[256], cmd[4096];
    snprintf(local, sizeof(local), "%s/bucket/ds", s.dir);
    snprintf(cmd, sizeof(cmd), "%s/segment-000000", local);
    struct stat st;
    cr_assert_eq(stat(cmd, &st), 0);
    cr_assert_gt(st.st_size, 64 << 20, "segment of %lld bytes", (long long)st.st_size);
    aws_env(s.dir);
    url_of(url, sizeof(url), "big");
    hdmlp_source_config *c = remote_config(NULL, 1);
    cr_assert_eq(hdmlp_dataset_upload(local, url, c, NULL, NULL), HDMLP_OK, "%s",
                 hdmlp_last_error());
    snprintf(cmd, sizeof(cmd), "'%s' '%s' same '%s' big '%s'", need("HDMLP_PY"),
             need("HDMLP_S3_TOOL"), need("HDMLP_S3_BUCKET"), local);
    run(cmd);
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source(url, c, &ds), HDMLP_OK, "%s", hdmlp_last_error());
    cr_assert_eq(hdmlp_dataset_verify(ds, NULL, NULL), HDMLP_OK, "%s", hdmlp_last_error());
    hdmlp_dataset_close(ds);
    hdmlp_source_config_free(c);
    objstore_stop(&s);
    objstore_cur = &objstore_spec;
}

/* Prefixes with "." and ".." segments are keys of their own: uploaded by hdmlp under the
 * literal keys (botocore lists them), read back by hdmlp. */
Test(remote, dot_segment_prefixes, .timeout = 180)
{
    objstore_server s = {0};
    local_root(&s, &objstore_spec);
    aws_env(s.dir);
    char local[700], cmd[4096];
    snprintf(local, sizeof(local), "%s/bucket/ds", s.dir);
    hdmlp_source_config *c = remote_config(NULL, 1);
    const char *const prefixes[] = {"x/../y", "y/./set"};
    for (int i = 0; i < 2; i++) {
        char url[256];
        url_of(url, sizeof(url), prefixes[i]);
        cr_assert_eq(hdmlp_dataset_upload(local, url, c, NULL, NULL), HDMLP_OK, "%s: %s", url,
                     hdmlp_last_error());
        snprintf(cmd, sizeof(cmd), "'%s' '%s' has '%s' '%s/index'", need("HDMLP_PY"),
                 need("HDMLP_S3_TOOL"), need("HDMLP_S3_BUCKET"), prefixes[i]);
        run(cmd);
        snprintf(cmd, sizeof(cmd), "'%s' '%s' same '%s' '%s' '%s'", need("HDMLP_PY"),
                 need("HDMLP_S3_TOOL"), need("HDMLP_S3_BUCKET"), prefixes[i], local);
        run(cmd);
        same_as_local(&s, url, c);
    }
    hdmlp_source_config_free(c);
    objstore_stop(&s);
}

/* A wrong secret: the server's SignatureDoesNotMatch, named as a signature mismatch. */
Test(remote, wrong_secret_is_a_signature_mismatch, .timeout = 60)
{
    hdmlp_source_config *c = remote_config(NULL, 1);
    cr_assert_eq(hdmlp_source_config_set_credentials(c, need("HDMLP_S3_ACCESS_KEY"),
                                                     "not/the/secret", NULL),
                 HDMLP_OK);
    char url[256];
    url_of(url, sizeof(url), "anything");
    hdmlp_dataset *ds = NULL;
    cr_assert_eq(hdmlp_dataset_open_source(url, c, &ds), HDMLP_E_IO);
    cr_assert(strstr(hdmlp_last_error(), "signature mismatch") != NULL, "%s",
              hdmlp_last_error());
    cr_assert(strstr(hdmlp_last_error(), "SignatureDoesNotMatch") != NULL, "%s",
              hdmlp_last_error());
    hdmlp_source_config_free(c);
}
