/* SPDX-License-Identifier: MIT */
#pragma once

#include <curl/curl.h>
#include <systemd/sd-event.h>

#include "shared/macro.h"

/* libcurl's multi interface inside an sd-event loop, the shape of systemd's
 * src/import/curl-util.c: one IO source per socket (curl_multi_assign), one
 * relative timer for curl's timeout, and finished transfers collected from a
 * defer source, so the finish callback never runs inside a libcurl callback
 * and may remove or add easy handles freely. Nothing here blocks: DNS goes
 * through libcurl's threaded resolver (Debian 12's libcurl is built with it).
 *
 * Single-threaded: every call from the event loop's thread. Only
 * src/query/ includes this header. */

typedef struct CurlGlue CurlGlue;

/* Called once per finished transfer, from the glue's defer source: easy is
 * the transfer, error 0 when libcurl ended it with CURLE_OK, else -EIO,
 * and code libcurl's own result. The handle is still added to the multi
 * handle: the callee removes it (curl_glue_remove()) and may free it, add
 * others or free other handles of this glue. It must not free the glue
 * itself. */
typedef void (*CurlGlueDone)(CURL *easy, int error, CURLcode code, void *userdata);

/* Borrows event (a reference is taken). done is called for every transfer
 * of this glue, with userdata. */
int curl_glue_new(sd_event *event, CurlGlueDone done, void *userdata, CurlGlue **ret);
/* Every easy handle must have been removed before. */
CurlGlue *curl_glue_free(CurlGlue *g);
DEFINE_TRIVIAL_CLEANUP_FUNC(CurlGlue *, curl_glue_free);

/* Start a transfer: the easy handle stays owned by the caller. */
int curl_glue_add(CurlGlue *g, CURL *easy);
/* Stop a transfer (no done callback afterwards); NULL and an easy handle
 * that is not added are fine. */
void curl_glue_remove(CurlGlue *g, CURL *easy);
