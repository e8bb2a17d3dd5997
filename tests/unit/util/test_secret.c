/*
 * The job's secret (lib/util/secret.c): its sources in order, the rules a
 * file must meet (each refusal naming the file and what is wrong), and
 * amlrun --make-secret's file.  Every case runs in its own process (test.h),
 * in its own directory as XDG_CONFIG_HOME, so the environment it sets is
 * its own.  Run as root, a file "owned by another user" is chowned to one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/secret.h"
#include "test.h"

static char dir[256];

/* Secrets of 32 bytes and more: the shortest accepted (secret.h). */
#define ENV_SECRET "from-env-0123456789abcdef0123456789"
#define FILE_SECRET "from-file-0123456789abcdef0123456789"
#define GOOD "0123456789abcdef0123456789abcdef"

/* A fresh directory as XDG_CONFIG_HOME, no secret in the environment. */
static void fresh(void)
{
    snprintf(dir, sizeof dir, "/tmp/amldist-secret-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    setenv("XDG_CONFIG_HOME", dir, 1);
    unsetenv("AMLDIST_JOB_TOKEN");
    unsetenv("AMLDIST_JOB_TOKEN_FILE");
}

/* rm -rf the case's directory. */
static void cleanup(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void put(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    CHECK(fchmod(fd, mode) == 0);
    close(fd);
}

/* The secret in file `path` (AMLDIST_JOB_TOKEN_FILE): load's result. */
static int load_from(const char *path, amldist__secret_t *s, char *why,
                     size_t size)
{
    setenv("AMLDIST_JOB_TOKEN_FILE", path, 1);
    return amldist__secret_load(s, why, size);
}

static void test_env_first(void)
{
    char why[600], path[300];
    amldist__secret_t s;
    fresh();
    snprintf(path, sizeof path, "%s/f", dir);
    put(path, FILE_SECRET "\n", 0600);
    setenv("AMLDIST_JOB_TOKEN_FILE", path, 1);
    setenv("AMLDIST_JOB_TOKEN", ENV_SECRET, 1);
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), 1);
    CHECK_INT_EQ(s.len, strlen(ENV_SECRET));
    CHECK(memcmp(s.bytes, ENV_SECRET, s.len) == 0);
    CHECK_STR_EQ(s.source, "AMLDIST_JOB_TOKEN");
    /* Empty is unset: the file comes next, less its newline. */
    setenv("AMLDIST_JOB_TOKEN", "", 1);
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), 1);
    CHECK_INT_EQ(s.len, strlen(FILE_SECRET));
    CHECK(memcmp(s.bytes, FILE_SECRET, s.len) == 0);
    CHECK_STR_EQ(s.source, path);
    amldist__secret_clear(&s);
    CHECK_INT_EQ(s.len, 0);
    CHECK_INT_EQ(s.bytes[0], 0);
    cleanup();
}

static void test_none(void)
{
    char why[600] = "x";
    amldist__secret_t s;
    fresh();
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), 0);
    CHECK_STR_EQ(why, "");
    /* A relative XDG_CONFIG_HOME is ignored: HOME/.config then. */
    setenv("XDG_CONFIG_HOME", "relative", 1);
    setenv("HOME", dir, 1);
    char want[300], got[300];
    snprintf(want, sizeof want, "%s/.config/amldist/secret", dir);
    CHECK_INT_EQ(amldist__secret_path(got, sizeof got), 0);
    CHECK_STR_EQ(got, want);
    cleanup();
}

/* Each bad file is refused, the message naming it and the fault. */
static void test_file_rules(void)
{
    char why[600], path[300], link[300], sub[300];
    amldist__secret_t s;
    fresh();
    snprintf(path, sizeof path, "%s/open", dir);
    put(path, GOOD "\n", 0644);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), -1);
    CHECK_STR_HAS(why, path);
    CHECK_STR_HAS(why, "mode 0644");
    put(path, GOOD "\n", 0640);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), -1);
    CHECK_STR_HAS(why, "mode 0640");
    put(path, GOOD "\n", 0604);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), -1);
    put(path, GOOD "\n", 0400);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), 1);
    /* A symbolic link to a good file. */
    snprintf(link, sizeof link, "%s/link", dir);
    CHECK(symlink(path, link) == 0);
    CHECK_INT_EQ(load_from(link, &s, why, sizeof why), -1);
    CHECK_STR_HAS(why, link);
    CHECK_STR_HAS(why, "symbolic link");
    /* A directory, a missing file, an empty one, a relative path. */
    snprintf(sub, sizeof sub, "%s/dir", dir);
    CHECK(mkdir(sub, 0700) == 0);
    CHECK_INT_EQ(load_from(sub, &s, why, sizeof why), -1);
    CHECK_STR_HAS(why, sub);
    CHECK_STR_HAS(why, "a directory");
    snprintf(sub, sizeof sub, "%s/missing", dir);
    CHECK_INT_EQ(load_from(sub, &s, why, sizeof why), -1);
    CHECK_STR_HAS(why, sub);
    CHECK_STR_HAS(why, "No such file");
    snprintf(sub, sizeof sub, "%s/empty", dir);
    put(sub, "\n", 0600);
    CHECK_INT_EQ(load_from(sub, &s, why, sizeof why), -1);
    CHECK_STR_HAS(why, "empty");
    CHECK_INT_EQ(load_from("rel/secret", &s, why, sizeof why), -1);
    CHECK_STR_HAS(why, "absolute");
    /* A FIFO is not read (nor waited on). */
    snprintf(sub, sizeof sub, "%s/fifo", dir);
    CHECK(mkfifo(sub, 0600) == 0);
    CHECK_INT_EQ(load_from(sub, &s, why, sizeof why), -1);
    CHECK_STR_HAS(why, "FIFO");
    cleanup();
}

static void test_file_owner(void)
{
    char why[600], path[300];
    amldist__secret_t s;
    fresh();
    snprintf(path, sizeof path, "%s/theirs", dir);
    put(path, GOOD "\n", 0600);
    uid_t other = geteuid() == 0 ? 65534 : 0;
    if (geteuid() != 0) {
        printf("# not root: the chown case is the shell test's\n");
        cleanup();
        return;
    }
    CHECK(chown(path, other, (gid_t)-1) == 0);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), -1);
    CHECK_STR_HAS(why, path);
    CHECK_STR_HAS(why, "owned by uid 65534");
    cleanup();
}

static void test_file_sizes(void)
{
    char why[600], path[300];
    amldist__secret_t s;
    static char big[AMLDIST__SECRET_MAX + 3];
    fresh();
    snprintf(path, sizeof path, "%s/big", dir);
    memset(big, 'a', AMLDIST__SECRET_MAX);
    put(path, big, 0600);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), 1);
    CHECK_INT_EQ(s.len, AMLDIST__SECRET_MAX);
    /* The longest secret and its file's newline (issue 38): the newline
     * is not counted. */
    big[AMLDIST__SECRET_MAX] = '\n';
    put(path, big, 0600);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), 1);
    CHECK_INT_EQ(s.len, AMLDIST__SECRET_MAX);
    memcpy(big + AMLDIST__SECRET_MAX, "\r\n", 2);
    put(path, big, 0600);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), 1);
    CHECK_INT_EQ(s.len, AMLDIST__SECRET_MAX);
    big[AMLDIST__SECRET_MAX + 1] = '\0';
    big[AMLDIST__SECRET_MAX] = 'a';
    put(path, big, 0600);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), -1);
    CHECK_STR_HAS(why, "longer than 4096");
    /* Bytes as they are, NUL included; only trailing newlines go. */
    static const char nul[] = "a\0" GOOD "\r\n\n";
    int fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(write(fd, nul, sizeof nul - 1) == (ssize_t)sizeof nul - 1);
    close(fd);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), 1);
    CHECK_INT_EQ(s.len, 2 + strlen(GOOD));
    CHECK(memcmp(s.bytes, nul, s.len) == 0);
    cleanup();
}

/* The XDG file: used when it is there, under the same rules. */
static void test_xdg_file(void)
{
    char why[600], path[300];
    amldist__secret_t s;
    fresh();
    snprintf(path, sizeof path, "%s/amldist", dir);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/amldist/secret", dir);
    put(path, "xdg-" GOOD "\n", 0600);
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), 1);
    CHECK_INT_EQ(s.len, 4 + strlen(GOOD));
    CHECK_STR_EQ(s.source, path);
    CHECK(chmod(path, 0660) == 0);
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), -1);
    CHECK_STR_HAS(why, path);
    CHECK_STR_HAS(why, "mode 0660");
    cleanup();
}

/* A secret under 32 bytes, from any source, is refused (issue 38): one
 * sniffed handshake would let anyone try every shorter value offline.
 * The line names the source, the length, the minimum and how to make one,
 * and nothing of the secret; 32 bytes, and 32 and a file's newline, are
 * accepted. */
static void test_min_length(void)
{
    char why[600], path[300], text[64];
    amldist__secret_t s;
    fresh();
    setenv("AMLDIST_JOB_TOKEN", "Q", 1);
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), -1);
    CHECK_STR_HAS(why, "AMLDIST_JOB_TOKEN: 1 byte, under the 32 a secret needs");
    CHECK_STR_HAS(why, "amlrun --make-secret");
    CHECK_STR_HAS(why, "head -c 32 /dev/urandom | base64");
    CHECK(strchr(why, 'Q') == NULL);
    CHECK_INT_EQ(s.len, 0);
    snprintf(text, sizeof text, "%.31s", GOOD);
    setenv("AMLDIST_JOB_TOKEN", text, 1);
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), -1);
    CHECK_STR_HAS(why, "AMLDIST_JOB_TOKEN: 31 bytes");
    CHECK(strstr(why, text) == NULL);
    setenv("AMLDIST_JOB_TOKEN", GOOD, 1);
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), 1);
    CHECK_INT_EQ(s.len, 32);
    unsetenv("AMLDIST_JOB_TOKEN");
    /* A file: its newline is not counted, either way. */
    snprintf(path, sizeof path, "%s/f", dir);
    put(path, GOOD "\n", 0600);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), 1);
    CHECK_INT_EQ(s.len, 32);
    put(path, GOOD "\r\n", 0600);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), 1);
    CHECK_INT_EQ(s.len, 32);
    snprintf(text, sizeof text, "%.31s\n", GOOD);
    put(path, text, 0600);
    CHECK_INT_EQ(load_from(path, &s, why, sizeof why), -1);
    CHECK_STR_HAS(why, path);
    CHECK_STR_HAS(why, "31 bytes, under the 32");
    CHECK_STR_HAS(why, "amlrun --make-secret");
    CHECK_INT_EQ(s.len, 0);
    CHECK_INT_EQ(s.bytes[0], 0);
    unsetenv("AMLDIST_JOB_TOKEN_FILE");
    /* The XDG file too. */
    snprintf(path, sizeof path, "%s/amldist", dir);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/amldist/secret", dir);
    put(path, "short\n", 0600);
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), -1);
    CHECK_STR_HAS(why, path);
    CHECK_STR_HAS(why, "5 bytes");
    cleanup();
}

static void test_make(void)
{
    char why[600], path[300], first[100] = "";
    amldist__secret_t s;
    struct stat st;
    fresh();
    /* Two levels missing: both made 0700. */
    char base[300];
    snprintf(base, sizeof base, "%s/cfg", dir);
    setenv("XDG_CONFIG_HOME", base, 1);
    umask(022);
    CHECK_INT_EQ(amldist__secret_make(path, sizeof path, why, sizeof why), 0);
    CHECK(stat(base, &st) == 0 && (st.st_mode & 07777) == 0700);
    snprintf(base, sizeof base, "%s/cfg/amldist", dir);
    CHECK(stat(base, &st) == 0 && (st.st_mode & 07777) == 0700);
    CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
          (st.st_mode & 07777) == 0600);
    CHECK_INT_EQ(st.st_size, 65);
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), 1);
    CHECK_INT_EQ(s.len, 64);
    CHECK_STR_EQ(s.source, path);
    for (size_t i = 0; i < s.len; i++)
        CHECK(strchr("0123456789abcdef", s.bytes[i]) != NULL);
    memcpy(first, s.bytes, 64);
    /* Never overwritten. */
    CHECK_INT_EQ(amldist__secret_make(path, sizeof path, why, sizeof why), 1);
    CHECK_STR_HAS(why, "exists already");
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), 1);
    CHECK(memcmp(first, s.bytes, 64) == 0);
    /* Another one elsewhere differs. */
    snprintf(base, sizeof base, "%s/cfg2", dir);
    setenv("XDG_CONFIG_HOME", base, 1);
    CHECK_INT_EQ(amldist__secret_make(path, sizeof path, why, sizeof why), 0);
    CHECK_INT_EQ(amldist__secret_load(&s, why, sizeof why), 1);
    CHECK(memcmp(first, s.bytes, 64) != 0);
    /* A symbolic link where the file goes is not followed. */
    snprintf(base, sizeof base, "%s/cfg3", dir);
    setenv("XDG_CONFIG_HOME", base, 1);
    CHECK(mkdir(base, 0700) == 0);
    snprintf(base, sizeof base, "%s/cfg3/amldist", dir);
    CHECK(mkdir(base, 0700) == 0);
    snprintf(base, sizeof base, "%s/cfg3/amldist/secret", dir);
    CHECK(symlink("/tmp/amldist-secret-nowhere", base) == 0);
    CHECK_INT_EQ(amldist__secret_make(path, sizeof path, why, sizeof why), 1);
    CHECK(access("/tmp/amldist-secret-nowhere", F_OK) != 0);
    cleanup();
}

int main(void)
{
    RUN(test_env_first);
    RUN(test_none);
    RUN(test_file_rules);
    RUN(test_file_owner);
    RUN(test_file_sizes);
    RUN(test_xdg_file);
    RUN(test_min_length);
    RUN(test_make);
    return test_summary();
}
