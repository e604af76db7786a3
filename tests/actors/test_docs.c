/* test_docs.c - the formats' documentation cannot drift: docs/messages.md's tables and the log format's version checked against actors/msg.h and actors/log.h. */
#define _GNU_SOURCE /* strtok_r, strdup */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "msg.h"

#ifndef TACT_SOURCE_DIR
#error "TACT_SOURCE_DIR (the source tree) comes from CMakeLists.txt"
#endif

/* A documentation file, whole, NUL-terminated (free() it). */
static char *s_doc(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/%s", TACT_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert(s && fread(s, 1, (size_t)n, f) == (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* The schema's fields of each message type as the docs write them:
 * "name: KIND, name: KIND" (no fields: "none"), the same order. */
#define S_MF(M, KIND, field) ", " #field ": " #KIND
#define S_MSG(NAME, name) {#NAME, "" TA_FIELDS_##NAME(S_MF, name)},
static const struct {
    const char *name, *fields; /* fields begin with ", " (or are "") */
} s_msgs[] = {TA_MSG_LIST(S_MSG)};
#undef S_MSG
#undef S_MF

/* A documented field list in canonical form: "a, b: K" becomes
 * "a: K, b: K"; what follows a ';' (the bulk frame) and a kind's
 * parenthesized remark ("MP (an AST record)") are dropped. */
static void s_canonical(const char *cell, char *out, size_t len) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", cell);
    char *semi = strchr(buf, ';');
    if (semi) *semi = '\0';
    out[0] = '\0';
    if (strcmp(buf, "none") == 0) return;
    const char *names[64];
    int pending = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        char *colon = strchr(tok, ':');
        if (!colon) {
            cr_assert_lt(pending, 64);
            names[pending++] = tok;
            continue;
        }
        *colon = '\0';
        char *kind = colon + 1;
        while (*kind == ' ') kind++;
        /* A kind with an argument keeps it (U64A(32), RECS(VIEW)); a remark goes. */
        char *space = strchr(kind, ' ');
        if (space) *space = '\0';
        names[pending++] = tok;
        for (int i = 0; i < pending; i++) {
            size_t used = strlen(out);
            snprintf(out + used, len - used, "%s%s: %s", used ? ", " : "", names[i], kind);
        }
        pending = 0;
    }
    cr_assert_eq(pending, 0, "a field without a kind in '%s'", cell);
}

/* The cells of a table row "| a | b | c |" into cells (at most max). */
static int s_cells(char *row, char **cells, int max) {
    int n = 0;
    char *p = row + 1;
    while (n < max) {
        char *bar = strstr(p, " |");
        if (!bar) break;
        *bar = '\0';
        while (*p == ' ') p++;
        cells[n++] = p;
        p = bar + 2;
        if (*p != ' ') break;
    }
    return n;
}

/* "## Message types": a row per type, numbered in declaration order, its
 * fields the schema's. */
Test(docs, the_message_table_is_the_schema) {
    char *doc = s_doc("messages.md"), *at = strstr(doc, "## Message types");
    cr_assert(at, "docs/messages.md has no Message types section");
    int seen = 0;
    char *save = NULL;
    for (char *line = strtok_r(at, "\n", &save); line && seen < TA_MSG__COUNT; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "| ", 2) != 0 || line[2] < '0' || line[2] > '9') continue;
        char *row = strdup(line), *cells[8];
        int n = s_cells(row, cells, 8);
        cr_assert_geq(n, 4, "a row of %d cells: %s", n, line);
        cr_assert_eq(atoi(cells[0]), seen, "row %s: types are numbered in order (want %d)", cells[0], seen);
        cr_assert_str_eq(cells[1], s_msgs[seen].name, "type %d is %s in msg.h", seen, s_msgs[seen].name);
        char got[2048];
        s_canonical(cells[2], got, sizeof got);
        const char *want = s_msgs[seen].fields[0] ? s_msgs[seen].fields + 2 : "";
        cr_assert_str_eq(got, want, "%s: the docs say '%s', msg.h '%s'", s_msgs[seen].name, got, want);
        free(row);
        seen++;
    }
    cr_assert_eq(seen, TA_MSG__COUNT, "docs/messages.md lists %d message types; msg.h has %d", seen, TA_MSG__COUNT);
    free(doc);
}

/* The records table: a row per record type, its fields the schema's
 * (ta_rec_fields), kinds as the docs write them (U64A(32), RECS(VIEW)). */
Test(docs, the_record_table_is_the_schema) {
    char *doc = s_doc("messages.md"), *at = strstr(doc, "| record | fields |");
    cr_assert(at, "docs/messages.md has no records table");
    static const char *kinds[] = {"U64", "I64", "MP", "U64S", "U64A", "I64A", "RECS", "STR"};
    int seen = 0;
    char *save = NULL;
    for (char *line = strtok_r(at, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "| ", 2) != 0) {
            if (seen) break;
            continue;
        }
        char *row = strdup(line), *cells[4];
        int n = s_cells(row, cells, 4);
        if (n < 2 || strcmp(cells[0], "record") == 0 || strncmp(cells[0], "---", 3) == 0) {
            free(row);
            continue;
        }
        cr_assert_lt(seen, TA_REC__COUNT, "more records documented than msg.h has: %s", cells[0]);
        cr_assert_str_eq(cells[0], ta_rec_type_name(seen), "record %d is %s in msg.h", seen, ta_rec_type_name(seen));
        size_t nf;
        const ta_rec_field_t *fs = ta_rec_fields((ta_rec_type_t)seen, &nf);
        char want[2048] = "", got[2048];
        for (size_t i = 0; i < nf; i++) {
            size_t used = strlen(want);
            if (fs[i].kind == TA_RK_U64A || fs[i].kind == TA_RK_I64A)
                snprintf(want + used, sizeof want - used, "%s%s: %s(%u)", i ? ", " : "", fs[i].name, kinds[fs[i].kind], fs[i].cap);
            else if (fs[i].kind == TA_RK_RECS)
                snprintf(want + used, sizeof want - used, "%s%s: RECS(%s)", i ? ", " : "", fs[i].name, ta_rec_type_name(fs[i].sub));
            else snprintf(want + used, sizeof want - used, "%s%s: %s", i ? ", " : "", fs[i].name, kinds[fs[i].kind]);
        }
        s_canonical(cells[1], got, sizeof got);
        cr_assert_str_eq(got, want, "%s: the docs say '%s', msg.h '%s'", cells[0], got, want);
        free(row);
        seen++;
    }
    cr_assert_eq(seen, TA_REC__COUNT, "docs/messages.md lists %d record types; msg.h has %d", seen, TA_REC__COUNT);
    free(doc);
}

/* The versions the docs state are the code's. */
Test(docs, the_documented_versions_are_the_code_s) {
    char *doc = s_doc("messages.md"), want[64];
    snprintf(want, sizeof want, "`TA_PROTOCOL_VERSION`, %d |", TA_PROTOCOL_VERSION);
    cr_assert(strstr(doc, want), "docs/messages.md does not give the protocol version as %d", TA_PROTOCOL_VERSION);
    snprintf(want, sizeof want, "types 10 to %d are the tensor pipeline's", TA_MSG__COUNT - 1);
    cr_assert(strstr(doc, want), "docs/messages.md does not say '%s'", want);
    free(doc);
    doc = s_doc("log-format.md");
    snprintf(want, sizeof want, "# The message log, format version %d\n", TA_LOG_VERSION);
    cr_assert(strncmp(doc, want, strlen(want)) == 0, "docs/log-format.md does not open with '%s'", want);
    free(doc);
}
