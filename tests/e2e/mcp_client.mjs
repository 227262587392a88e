// SPDX-License-Identifier: MIT
// A driver of the official MCP TypeScript SDK's Client over its Streamable
// HTTP transport, for tests/e2e/test_mcp*.py: nothing of the protocol is
// written here. One JSON command a line on stdin, one JSON event a line on
// stdout:
//   {"op": "connect", "url": U, "headers": {...}}  -> {"op": "connect", "ok", "protocolVersion", "serverInfo", "capabilities"}
//   {"op": "list"}                                 -> {"op": "list", "ok", "tools"}
//   {"op": "ping"}                                 -> {"op": "ping", "ok"}
//   {"op": "call", "tag": T, "name", "arguments", "progress": bool}
//        -> {"tag": T, "event": "progress", "progress", "message"} for each notification,
//           then {"tag": T, "event": "result", "result"} or {"tag": T, "event": "error", "message", "code"}
//   {"op": "cancel", "tag": T}   aborts the call: the SDK sends notifications/cancelled
//   {"op": "close"}
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

let client = null;
const calls = new Map();

function emit(o) {
        process.stdout.write(JSON.stringify(o) + '\n');
}

async function handle(cmd) {
        switch (cmd.op) {
        case 'connect': {
                client = new Client({ name: 'wikiweb-e2e', version: '1.0.0' });
                const transport = new StreamableHTTPClientTransport(new URL(cmd.url), {
                        requestInit: { headers: cmd.headers || {} },
                });
                try {
                        await client.connect(transport);
                        emit({
                                op: 'connect',
                                ok: true,
                                protocolVersion: transport.protocolVersion,
                                serverInfo: client.getServerVersion(),
                                capabilities: client.getServerCapabilities(),
                        });
                } catch (e) {
                        emit({ op: 'connect', ok: false, message: String(e && e.message), code: e && e.code });
                }
                break;
        }
        case 'list': {
                const r = await client.listTools();
                emit({ op: 'list', ok: true, tools: r.tools });
                break;
        }
        case 'ping': {
                await client.ping();
                emit({ op: 'ping', ok: true });
                break;
        }
        case 'call': {
                const ac = new AbortController();
                calls.set(cmd.tag, ac);
                const options = { signal: ac.signal, timeout: 120000, resetTimeoutOnProgress: true };
                if (cmd.progress)
                        options.onprogress = (p) =>
                                emit({ tag: cmd.tag, event: 'progress', progress: p.progress, message: p.message });
                client.callTool({ name: cmd.name, arguments: cmd.arguments || {} }, undefined, options)
                        .then((result) => emit({ tag: cmd.tag, event: 'result', result }))
                        .catch((e) => emit({ tag: cmd.tag, event: 'error', message: String(e && e.message), code: e && e.code }))
                        .finally(() => calls.delete(cmd.tag));
                break;
        }
        case 'cancel': {
                const ac = calls.get(cmd.tag);
                if (ac)
                        ac.abort('cancelled by the test');
                break;
        }
        case 'close':
                if (client)
                        await client.close();
                process.exit(0);
        }
}

const rl = createInterface({ input: process.stdin });
let chain = Promise.resolve();
rl.on('line', (line) => {
        if (!line.trim())
                return;
        const cmd = JSON.parse(line);
        chain = chain.then(() => handle(cmd)).catch((e) => emit({ op: cmd.op, ok: false, message: String(e && e.message), code: e && e.code }));
});
rl.on('close', () => chain.then(() => process.exit(0)));
