/* status.c - status messages and names from TACT_STATUS_MAP, and the version string. */
#include "tact.h"

#define S_STR2(x) #x
#define S_STR(x) S_STR2(x)

const char *tact_strerror(int status) {
    switch (status) {
#define S_CASE(name, code, text) case TACT_##name: return text;
        TACT_STATUS_MAP(S_CASE)
#undef S_CASE
    }
    return "unknown status";
}

const char *tact_status_name(int status) {
    switch (status) {
#define S_CASE(name, code, text) case TACT_##name: return #name;
        TACT_STATUS_MAP(S_CASE)
#undef S_CASE
    }
    return "UNKNOWN";
}

const char *tact_version(void) {
    return S_STR(TACT_VERSION_MAJOR) "." S_STR(TACT_VERSION_MINOR) "." S_STR(TACT_VERSION_PATCH);
}
