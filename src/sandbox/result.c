/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <string.h>

#include "sandbox/result.h"
#include "shared/json-util.h"
#include "shared/macro.h"

void sandbox_result_done(SandboxResult *r) {
        assert(r);

        free(r->stdout_text);
        free(r->stderr_text);
        for (size_t i = 0; i < r->n_files; i++)
                artifact_done(&r->files[i]);
        free(r->files);
        *r = (SandboxResult){ 0 };
}

static int result_add_files(json_object *o, const SandboxResult *res) {
        _cleanup_(json_object_putp) json_object *files = json_object_new_array();
        int r;

        if (!files)
                return -ENOMEM;
        for (size_t i = 0; i < res->n_files; i++) {
                _cleanup_(json_object_putp) json_object *f = json_object_new_object();
                const char *name = res->files[i].name ? res->files[i].name : "";

                if (!f)
                        return -ENOMEM;
                r = json_add(f, "name", json_string_bytes(name, strlen(name)));
                if (r < 0)
                        return r;
                r = json_add(f, "size_bytes", json_object_new_uint64(res->files[i].size_bytes));
                if (r < 0)
                        return r;
                r = json_append(files, TAKE_PTR(f));
                if (r < 0)
                        return r;
        }
        return json_add(o, "files", TAKE_PTR(files));
}

/* json-c's JSON null is a NULL value, which json_add() takes for a failed
 * constructor. */
static int result_add_null(json_object *o, const char *key) {
        return json_object_object_add(o, key, NULL) < 0 ? -ENOMEM : 0;
}

int sandbox_result_to_json(const SandboxResult *res, SandboxResultShape shape, json_object **ret) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        int r;

        assert(res);
        assert(shape >= 0 && shape < _SANDBOX_RESULT_SHAPE_MAX);
        assert(ret);

        if (!o)
                return -ENOMEM;
        if (res->has_exit_code)
                r = json_add(o, "exit_code", json_object_new_int(res->exit_code));
        else
                r = result_add_null(o, "exit_code");
        if (r < 0)
                return r;
        if (res->signal)
                r = json_add(o, "signal", json_string_bytes(res->signal, strlen(res->signal)));
        else
                r = result_add_null(o, "signal");
        if (r < 0)
                return r;
        r = json_add(o, "timed_out", json_object_new_boolean(res->timed_out));
        if (r < 0)
                return r;
        if (shape == SANDBOX_RESULT_TOOL) {
                r = json_add(o, "stdout", json_string_bytes(res->stdout_text, res->stdout_size));
                if (r < 0)
                        return r;
                r = json_add(o, "stderr", json_string_bytes(res->stderr_text, res->stderr_size));
                if (r < 0)
                        return r;
        }
        r = result_add_files(o, res);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}
