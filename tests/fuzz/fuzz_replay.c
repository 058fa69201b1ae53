/*
 * Replays fuzz inputs through a libFuzzer target built without the fuzzer (linked with
 * one tests/fuzz/fuzz_NAME.c): every file named on the command line, and every regular file
 * inside each directory named, in sorted order. A target aborts on a violated invariant,
 * so a zero exit means every input passed. Used by ctest (tests/fuzz/fuzz_tests.cmake) for
 * tests/fuzz/regress/TARGET/ (inputs that once crashed) and tests/fuzz/corpus/TARGET/.
 *
 *   fuzz_replay_list DIR_OR_FILE...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *const f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *const p = realloc(buf, cap);
            if (!p) {
                fclose(f);
                free(buf);
                fprintf(stderr, "%s: out of memory\n", path);
                return -1;
            }
            buf = p;
        }
        const size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) {
            break;
        }
    }
    const int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        fprintf(stderr, "%s: read error\n", path);
        return -1;
    }
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    /* a copy of exactly `len` bytes, so ASan sees reads past the end */
    uint8_t *const exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    if (len) {
        memcpy(exact, buf, len);
    }
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    unsigned long count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(argv[i]) != 0) {
                return 1;
            }
            count++;
            continue;
        }
        struct dirent **names;
        const int n = scandir(argv[i], &names, NULL, alphasort);
        if (n < 0) {
            perror(argv[i]);
            return 1;
        }
        char **paths = calloc((size_t)n + 1, sizeof(char *));
        int np = 0;
        for (int j = 0; j < n; j++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], names[j]->d_name);
            free(names[j]);
            struct stat fs;
            if (paths && stat(path, &fs) == 0 && S_ISREG(fs.st_mode) && path[0]) {
                paths[np++] = strdup(path);
            }
        }
        free(names);
        if (!paths) {
            return 1;
        }
        qsort(paths, (size_t)np, sizeof(char *), by_name);
        for (int j = 0; j < np; j++) {
            if (!paths[j] || replay_file(paths[j]) != 0) {
                return 1;
            }
            free(paths[j]);
            count++;
        }
        free(paths);
    }
    printf("replayed %lu inputs: all passed\n", count);
    return 0;
}
