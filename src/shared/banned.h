/* SPDX-License-Identifier: MIT */
#pragma once

/* Functions that must not be used, as git's banned.h: each use is a compile
 * error that names the function. Included last by shared/macro.h. */

#define BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)
#undef strcat
#define strcat(x, y) BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) BANNED(strncpy)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) BANNED(vsprintf)
#undef strtok
#define strtok(x, y) BANNED(strtok)
#undef atoi
#define atoi(x) BANNED(atoi)
#undef atol
#define atol(x) BANNED(atol)
#undef gmtime
#define gmtime(x) BANNED(gmtime)
#undef localtime
#define localtime(x) BANNED(localtime)
#undef system
#define system(x) BANNED(system)
#undef popen
#define popen(x, y) BANNED(popen)
