// Latency of the E2B SDK against warren, printed as JSON. Not part of
// `make test`: run `make bench-e2b` (throwaway daemon), or against a running
// daemon:
//
//   E2B_API_URL=http://127.0.0.1:3000 E2B_SANDBOX_URL=http://127.0.0.1:3000 \
//   E2B_API_KEY=e2b_... E2B_DOMAIN=localhost node bench.mjs
//
// BENCH_N (default 200) sets the command and file round trips,
// BENCH_CREATES (default 20) the creates.
import { performance } from 'node:perf_hooks'
import { Sandbox } from 'e2b'

for (const v of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
  if (!process.env[v]) {
    console.error(`${v} is not set (see the comment at the top of bench.mjs)`)
    process.exit(2)
  }
}
const N = Number(process.env.BENCH_N ?? 200)
const CREATES = Number(process.env.BENCH_CREATES ?? 20)

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b)
  const q = (p) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
  const r = (x) => Math.round(x * 100) / 100
  return { n: s.length, p50Ms: r(q(50)), p99Ms: r(q(99)), minMs: r(s[0]), maxMs: r(s.at(-1)) }
}

async function rawStartTrue(sbx) {
  const msg = Buffer.from(JSON.stringify({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'true'], envs: {} } }))
  const body = Buffer.alloc(5 + msg.length)
  body.writeUInt32BE(msg.length, 1)
  msg.copy(body, 5)
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/process.Process/Start`, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/connect+json',
      'Connect-Protocol-Version': '1',
      'E2b-Sandbox-Id': sbx.sandboxId,
      'E2b-Sandbox-Port': '49983',
      'X-Access-Token': sbx.envdAccessToken,
      Authorization: 'Basic ' + Buffer.from('user:').toString('base64'),
    },
    body,
  })
  const all = Buffer.from(await res.arrayBuffer())
  if (res.status !== 200 || !all.includes('"end"')) throw new Error(`raw Start: ${res.status} ${all}`)
}

async function timeEach(n, fn) {
  const out = []
  for (let i = 0; i < n; i++) {
    const t = performance.now()
    await fn(i)
    out.push(performance.now() - t)
  }
  return out
}

const result = { sdk: 'e2b 2.51.0', apiUrl: process.env.E2B_API_URL }
const sbx = await Sandbox.create({ timeoutMs: 600_000 })
try {
  // Warm up connections and caches before measuring.
  for (let i = 0; i < 5; i++) await sbx.commands.run('true')
  result.commandsRunTrue = summary(await timeEach(N, () => sbx.commands.run('true')))
  // The same Start as the SDK sends (bash -l -c true, JSON Connect
  // streaming) with plain fetch: what is warren's and what is the SDK's.
  result.rawFetchStartTrue = summary(await timeEach(N, () => rawStartTrue(sbx)))

  const payload = new Uint8Array(4096)
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 31) % 256
  await sbx.files.write('/tmp/bench.bin', payload.buffer)
  result.filesWriteRead4KiB = summary(
    await timeEach(N, async (i) => {
      await sbx.files.write(`/tmp/bench-${i % 8}.bin`, payload.buffer)
      const back = await sbx.files.read(`/tmp/bench-${i % 8}.bin`, { format: 'bytes' })
      if (back.length !== payload.length) throw new Error(`read ${back.length} bytes, wrote ${payload.length}`)
    }),
  )
} finally {
  await sbx.kill().catch(() => {})
}

const createMs = []
for (let i = 0; i < CREATES; i++) {
  const t = performance.now()
  const s = await Sandbox.create()
  createMs.push(performance.now() - t)
  await s.kill()
}
result.sandboxCreate = summary(createMs)

console.log(JSON.stringify(result, null, 2))
