/* SPDX-License-Identifier: MIT */
/* Replays fuzz inputs without libFuzzer (as systemd's fuzz-main.c): each
 * argument is a file or a directory of files, fed once to the target.
 * Linked into every fuzz target when -Dfuzzers=false, which is how
 * "meson test --suite fuzz" replays the checked-in corpora with gcc. */

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz.h"

static int run_file(const char *path) {
        FILE *f = fopen(path, "rb");
        uint8_t *buf;
        long n;

        if (!f) {
                perror(path);
                return -1;
        }
        if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
                fclose(f);
                return -1;
        }
        buf = malloc((size_t) n + 1);
        if (!buf || fread(buf, 1, (size_t) n, f) != (size_t) n) {
                free(buf);
                fclose(f);
                return -1;
        }
        fclose(f);
        (void) LLVMFuzzerTestOneInput(buf, (size_t) n);
        free(buf);
        return 0;
}

int main(int argc, char *argv[]) {
        unsigned count = 0;

        for (int i = 1; i < argc; i++) {
                struct stat st;

                if (stat(argv[i], &st) < 0) {
                        perror(argv[i]);
                        return EXIT_FAILURE;
                }
                if (S_ISDIR(st.st_mode)) {
                        DIR *d = opendir(argv[i]);
                        struct dirent *de;

                        if (!d)
                                return EXIT_FAILURE;
                        while ((de = readdir(d))) {
                                char path[4096];

                                if (de->d_name[0] == '.')
                                        continue;
                                snprintf(path, sizeof path, "%s/%s", argv[i], de->d_name);
                                if (run_file(path) < 0) {
                                        closedir(d);
                                        return EXIT_FAILURE;
                                }
                                count++;
                        }
                        closedir(d);
                } else {
                        if (run_file(argv[i]) < 0)
                                return EXIT_FAILURE;
                        count++;
                }
        }
        printf("replayed %u inputs\n", count);
        if (count == 0) {
                fprintf(stderr, "no inputs: a corpus must not be empty\n");
                return EXIT_FAILURE;
        }
        return EXIT_SUCCESS;
}
