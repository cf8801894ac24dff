// warren's MCP conformance test: the official npm client
// (@modelcontextprotocol/sdk) drives warren's MCP server over both of its
// transports, `warren mcp` on stdio and the daemon's /mcp over Streamable
// HTTP, and runs a sandbox's life through the tools. The test is written to
// what an MCP client does, not to what warren happens to do: results are
// read from the protocol's content blocks and isError flags only.
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import path from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

function required(name) {
  const v = process.env[name]
  if (!v) {
    throw new Error(
      `${name} is not set: run the test through \`make test\` (test/e2e/mcp_node_test.go starts a daemon and sets WARREN_URL, WARREN_API_KEY, WARREN_BIN, WARREN_TEMPLATE)`,
    )
  }
  return v
}

const url = required('WARREN_URL').replace(/\/+$/, '')
const apiKey = required('WARREN_API_KEY')
const bin = required('WARREN_BIN')
const template = process.env.WARREN_TEMPLATE || 'bb'

// The tools warren's MCP server offers, sorted.
const wantTools = [
  'apply_patch', 'bash', 'diff', 'edit', 'fork', 'glob', 'grep', 'ls', 'read', 'rollback',
  'sandbox_create', 'sandbox_kill', 'sandbox_list', 'snapshot', 'write',
]

// text is what a model reads of a tool result: its text content blocks.
function text(res) {
  return (res.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('')
}

// field finds "name: value" on a line of a tool's answer.
function field(out, name) {
  const m = out.match(new RegExp(`^${name}: (\\S+)$`, 'm'))
  assert.ok(m, `no "${name}: ..." line in ${JSON.stringify(out)}`)
  return m[1]
}

const transports = [
  {
    name: 'stdio (warren mcp)',
    open() {
      const t = new StdioClientTransport({
        command: path.join(bin, 'warren'),
        args: ['mcp'],
        env: { WARREN_URL: url, WARREN_API_KEY: apiKey },
        stderr: 'pipe',
      })
      // warren mcp logs to stderr only; shown so that a failure explains itself.
      t.stderr?.on('data', (b) => process.stderr.write(`[warren mcp] ${b}`))
      return t
    },
  },
  {
    name: 'Streamable HTTP (/mcp)',
    open() {
      return new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${apiKey}` } },
      })
    },
  },
]

for (const tr of transports) {
  describe(`MCP over ${tr.name}`, () => {
    let client
    let transport
    const created = new Set()

    // call runs a tool and answers its text and isError; a protocol error
    // (as opposed to a tool error) throws.
    async function call(name, args) {
      const res = await client.callTool({ name, arguments: args })
      assert.ok(Array.isArray(res.content), `${name}: a result without content: ${JSON.stringify(res)}`)
      return { out: text(res), isError: res.isError === true }
    }
    async function mustCall(name, args) {
      const { out, isError } = await call(name, args)
      assert.equal(isError, false, `${name} ${JSON.stringify(args)}: tool error: ${out}`)
      return out
    }

    before(async () => {
      transport = tr.open()
      client = new Client({ name: 'warren-conformance', version: '1.0.0' })
      await client.connect(transport)
    })

    after(async () => {
      if (!client) return
      // Sandboxes a failed test left behind; ones already killed answer a tool error.
      await Promise.allSettled(
        [...created].map((id) => client.callTool({ name: 'sandbox_kill', arguments: { sandboxId: id } })),
      )
      if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
        await transport.terminateSession().catch(() => {})
      }
      await client.close()
    })

    it('initializes with warren as the server', () => {
      const info = client.getServerVersion()
      assert.equal(info?.name, 'warren')
      assert.ok(client.getServerCapabilities()?.tools, 'the server does not announce the tools capability')
      assert.match(client.getInstructions() ?? '', /sandbox_create/)
      if (transport instanceof StreamableHTTPClientTransport) {
        assert.ok(transport.sessionId, 'the HTTP server assigned no Mcp-Session-Id')
      }
    })

    it('lists the tools with their schemas', async () => {
      const { tools } = await client.listTools()
      assert.deepEqual(tools.map((t) => t.name).sort(), wantTools)
      for (const t of tools) {
        assert.equal(t.inputSchema?.type, 'object', `${t.name}'s inputSchema is not an object schema`)
      }
      const bash = tools.find((t) => t.name === 'bash')
      assert.ok(bash.inputSchema.required?.includes('sandboxId'), `bash does not require sandboxId: ${JSON.stringify(bash.inputSchema)}`)
      assert.ok(bash.inputSchema.required?.includes('command'), `bash does not require command: ${JSON.stringify(bash.inputSchema)}`)
      assert.ok(bash.inputSchema.properties?.turn, `bash has no turn parameter: ${JSON.stringify(bash.inputSchema)}`)
      assert.equal(tools.find((t) => t.name === 'read').annotations?.readOnlyHint, true)
    })

    it("runs a sandbox's life through the tools", async () => {
      const runId = Math.random().toString(16).slice(2, 10)
      const created_ = await mustCall('sandbox_create', { template, metadata: { run: runId } })
      const id = field(created_, 'sandboxId')
      created.add(id)

      assert.match(await mustCall('sandbox_list', { metadata: { run: runId } }), new RegExp(`^${id}\\b`, 'm'))

      const file = '/workspace/mcp/notes.txt'
      await mustCall('write', { sandboxId: id, path: file, content: 'alpha\nbeta\n' })
      await mustCall('edit', { sandboxId: id, path: file, oldString: 'beta', newString: 'gamma' })
      assert.match(await mustCall('grep', { sandboxId: id, pattern: 'gam+a', path: '/workspace' }), /notes\.txt/)

      const snap = field(await mustCall('snapshot', { sandboxId: id, name: `after-gamma-${runId}` }), 'snapshotId')

      await mustCall('edit', { sandboxId: id, path: file, oldString: 'gamma', newString: 'delta' })
      let out = await mustCall('read', { sandboxId: id, path: file })
      assert.ok(out.includes('delta') && !out.includes('gamma'), `read after the second edit = ${JSON.stringify(out)}`)
      out = await mustCall('diff', { from: snap })
      assert.ok(out.includes(`M file ${file}`) && out.includes('+delta') && out.includes('-gamma'), `diff = ${JSON.stringify(out)}`)

      await mustCall('rollback', { sandboxId: id, snapshotId: snap })
      out = await mustCall('read', { sandboxId: id, path: file })
      assert.ok(
        out.includes('alpha') && out.includes('gamma') && !out.includes('delta') && !out.includes('beta'),
        `read after rollback = ${JSON.stringify(out)}, want the snapshot's content (alpha, gamma)`,
      )

      const ok = await call('bash', { sandboxId: id, command: 'echo hello from $(cat /workspace/mcp/notes.txt | tail -n 1)' })
      assert.deepEqual(ok, { out: 'hello from gamma', isError: false })
      const bad = await call('bash', { sandboxId: id, command: 'echo oops >&2; exit 3' })
      assert.equal(bad.isError, true, `a failing command is not a tool error: ${JSON.stringify(bad)}`)
      assert.ok(bad.out.includes('oops') && bad.out.includes('[exit code 3]'), `failing bash = ${JSON.stringify(bad.out)}`)

      // A bad edit is the model's mistake: a tool result with isError, not a
      // protocol error, and the file unharmed.
      const miss = await call('edit', { sandboxId: id, path: file, oldString: 'no such text', newString: 'x' })
      assert.equal(miss.isError, true, `edit of missing text = ${JSON.stringify(miss)}`)
      assert.ok(miss.out.length > 0, 'the failed edit says nothing')
      out = await mustCall('read', { sandboxId: id, path: file })
      assert.ok(out.includes('alpha') && out.includes('gamma'), `read after the failed edit = ${JSON.stringify(out)}`)

      assert.match(await mustCall('sandbox_kill', { sandboxId: id }), new RegExp(id))
      created.delete(id)
      assert.doesNotMatch(await mustCall('sandbox_list', { metadata: { run: runId } }), new RegExp(id))
      const gone = await call('bash', { sandboxId: id, command: 'true' })
      assert.equal(gone.isError, true, `bash in a killed sandbox = ${JSON.stringify(gone)}`)
    })
  })
}

describe('/mcp authentication', () => {
  const initialize = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'no-key', version: '1.0.0' } },
  })
  async function post(headers) {
    const res = await fetch(`${url}/mcp`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
      body: initialize,
    })
    await res.arrayBuffer()
    return res
  }

  it('answers 401 to a request without an API key', async () => {
    const res = await post({})
    assert.equal(res.status, 401)
    assert.equal(res.headers.get('mcp-session-id'), null)
  })

  it('answers 401 to a wrong API key', async () => {
    const res = await post({ Authorization: 'Bearer e2b_not-a-key' })
    assert.equal(res.status, 401)
    assert.equal(res.headers.get('mcp-session-id'), null)
  })
})
