// sandbox.commands and sandbox.pty against one shared sandbox.
import { test, describe, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, TimeoutError, NotFoundError } from 'e2b'
import { track, killAll, eventually, runId } from './helpers.mjs'

let sbx
before(async () => {
  sbx = track(await Sandbox.create({ timeoutMs: 300_000 }))
})
after(killAll)

const isExitError = (code) => (err) => {
  assert.ok(err instanceof CommandExitError, `want CommandExitError, got ${err?.stack ?? err}`)
  if (code !== undefined) assert.equal(err.exitCode, code)
  else assert.notEqual(err.exitCode, 0)
  return true
}

describe('commands.run', () => {
  test('stdout, stderr and exit code 0', async () => {
    const r = await sbx.commands.run('echo out; echo err >&2')
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'out\n')
    assert.equal(r.stderr, 'err\n')
  })

  test('default user is user, in /home/user', async () => {
    const r = await sbx.commands.run('whoami; pwd; echo "$HOME"; id -u; id -gn')
    assert.equal(r.stdout, 'user\n/home/user\n/home/user\n1000\nuser\n')
  })

  test("user: 'root' runs as root in /root", async () => {
    const r = await sbx.commands.run('whoami; pwd; echo "$HOME"; id -u', { user: 'root' })
    assert.equal(r.stdout, 'root\n/root\n/root\n0\n')
  })

  test('cwd and envs', async () => {
    const r = await sbx.commands.run('pwd; echo "$A|$B"; whoami', { cwd: '/tmp', envs: { A: '1', B: 'two words' } })
    assert.equal(r.stdout, '/tmp\n1|two words\nuser\n')
    const rel = await sbx.commands.run('mkdir -p sub && cd sub && pwd')
    assert.equal(rel.stdout, '/home/user/sub\n')
  })

  test('non-zero exit throws CommandExitError with exitCode, stdout and stderr', async () => {
    await assert.rejects(sbx.commands.run('echo out; echo err >&2; exit 3'), (err) => {
      isExitError(3)(err)
      assert.equal(err.stdout, 'out\n')
      assert.equal(err.stderr, 'err\n')
      return true
    })
  })

  test('timeoutMs: a long command times out with TimeoutError', async () => {
    await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1_500 }), (err) => {
      assert.ok(err instanceof TimeoutError, `want TimeoutError, got ${err?.stack ?? err}`)
      return true
    })
  })

  test('onStdout and onStderr receive the output as it is produced, in order', async () => {
    const events = []
    const r = await sbx.commands.run('for i in 1 2 3; do echo "out$i"; sleep 0.2; echo "err$i" >&2; sleep 0.2; done', {
      onStdout: (d) => events.push(['out', d]),
      onStderr: (d) => events.push(['err', d]),
    })
    assert.equal(r.stdout, 'out1\nout2\nout3\n')
    assert.equal(r.stderr, 'err1\nerr2\nerr3\n')
    assert.equal(events.filter(([k]) => k === 'out').map(([, d]) => d).join(''), r.stdout)
    assert.equal(events.filter(([k]) => k === 'err').map(([, d]) => d).join(''), r.stderr)
    // The two streams interleave as the command wrote them.
    const order = events.flatMap(([k, d]) => d.split('\n').filter(Boolean).map((l) => `${k}:${l}`))
    assert.deepEqual(order, ['out:out1', 'err:err1', 'out:out2', 'err:err2', 'out:out3', 'err:err3'])
  })

  test('a chunk arrives while the command still runs; stdin: true takes input', async () => {
    const chunks = []
    const h = await sbx.commands.run('echo first; read line; echo "got $line"', {
      background: true,
      stdin: true,
      onStdout: (d) => chunks.push(d),
    })
    // The command blocks on read until we send input, so "first" can only
    // have arrived by streaming.
    await eventually('the first chunk', () => chunks.join('') === 'first\n')
    await sbx.commands.sendStdin(h.pid, 'second\n')
    const r = await h.wait()
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'first\ngot second\n')
    assert.equal(chunks.join(''), 'first\ngot second\n')
  })
})

describe('background commands', () => {
  test('background: true returns a handle; wait() gives the result', async () => {
    const h = await sbx.commands.run('sleep 0.5; echo done; echo warn >&2', { background: true })
    assert.ok(Number.isInteger(h.pid) && h.pid > 0, `pid ${h.pid}`)
    const r = await h.wait()
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'done\n')
    assert.equal(r.stderr, 'warn\n')
    assert.equal(h.exitCode, 0)
    assert.equal(h.stdout, 'done\n')
  })

  test('background failure: wait() throws CommandExitError', async () => {
    const h = await sbx.commands.run('echo partial; exit 7', { background: true })
    await assert.rejects(h.wait(), (err) => {
      isExitError(7)(err)
      assert.equal(err.stdout, 'partial\n')
      return true
    })
  })

  test('commands.list shows a running command with pid, cmd and args', async () => {
    const cmd = `sleep 300 # ${runId}`
    const h = await sbx.commands.run(cmd, { background: true, cwd: '/tmp', envs: { TAGGED: 'yes' } })
    try {
      const procs = await sbx.commands.list()
      const p = procs.find((x) => x.pid === h.pid)
      assert.ok(p, `pid ${h.pid} missing from ${JSON.stringify(procs)}`)
      assert.equal(p.cmd, '/bin/bash')
      assert.deepEqual(p.args, ['-l', '-c', cmd])
      assert.equal(p.envs.TAGGED, 'yes')
      assert.equal(p.cwd, '/tmp')
    } finally {
      await h.kill()
    }
  })

  test('handle.kill() ends the command; wait() then throws; the pid leaves the list', async () => {
    const h = await sbx.commands.run('sleep 300', { background: true })
    assert.equal(await h.kill(), true)
    await assert.rejects(h.wait(), isExitError())
    await eventually('the pid to leave the list', async () => !(await sbx.commands.list()).some((x) => x.pid === h.pid))
    assert.equal(await h.kill(), false, 'killing a finished command answers false')
  })

  test('commands.kill(pid) and kill of an unknown pid', async () => {
    const h = await sbx.commands.run('sleep 300', { background: true })
    assert.equal(await sbx.commands.kill(h.pid), true)
    await assert.rejects(h.wait(), isExitError())
    assert.equal(await sbx.commands.kill(999_999), false)
  })

  test('commands.connect(pid): output produced after the reconnect arrives', async () => {
    const flag = `/tmp/go-${runId}`
    const first = []
    const h = await sbx.commands.run(`echo before; while [ ! -e ${flag} ]; do sleep 0.1; done; echo after`, {
      background: true,
      onStdout: (d) => first.push(d),
    })
    await eventually('"before" on the first stream', () => first.join('') === 'before\n')
    await h.disconnect()

    const second = []
    const c = await sbx.commands.connect(h.pid, { onStdout: (d) => second.push(d) })
    assert.equal(c.pid, h.pid)
    await sbx.files.write(flag, '')
    const r = await c.wait()
    assert.equal(r.exitCode, 0)
    assert.match(second.join(''), /after\n$/)
    assert.ok(!first.join('').includes('after'), 'a disconnected handle gets no more output')
  })

  test('commands.connect to an unknown pid fails with NotFoundError', async () => {
    await assert.rejects(sbx.commands.connect(999_999), NotFoundError)
  })

  test('sendStdin and closeStdin', async () => {
    const h = await sbx.commands.run('cat', { background: true, stdin: true })
    await sbx.commands.sendStdin(h.pid, 'hello\n')
    await eventually('cat to echo the first line', () => h.stdout === 'hello\n')
    await h.sendStdin('multi\nline !@#$%^&*()_+ ünïcödé\n')
    await sbx.commands.sendStdin(h.pid, new TextEncoder().encode('bytes\n'))
    await eventually('cat to echo everything', () => h.stdout === 'hello\nmulti\nline !@#$%^&*()_+ ünïcödé\nbytes\n')
    await sbx.commands.closeStdin(h.pid)
    const r = await h.wait()
    assert.equal(r.exitCode, 0, 'cat ends at EOF')
    assert.equal(r.stdout, 'hello\nmulti\nline !@#$%^&*()_+ ünïcödé\nbytes\n')
  })
})

describe('pty', () => {
  const text = (chunks) => Buffer.concat(chunks.map((c) => Buffer.from(c))).toString('utf8')

  test('create with a size, sendInput, onData chunks, exit code', async () => {
    const chunks = []
    const t = await sbx.pty.create({ cols: 91, rows: 27, onData: (d) => chunks.push(d), envs: { ABC: '123' } })
    assert.ok(Number.isInteger(t.pid) && t.pid > 0)
    await sbx.pty.sendInput(t.pid, new TextEncoder().encode('stty size; echo "v=$ABC"; echo "cwd=$(pwd)"; echo "me=$(whoami)"; tty; exit 0\n'))
    const r = await t.wait()
    assert.equal(r.exitCode, 0)
    assert.ok(chunks.length > 0 && chunks.every((c) => c instanceof Uint8Array), 'onData gets Uint8Array chunks')
    const out = text(chunks)
    assert.match(out, /27 91/, `stty size in ${JSON.stringify(out)}`)
    assert.match(out, /v=123/)
    assert.match(out, /cwd=\/home\/user/)
    assert.match(out, /me=user/)
    assert.match(out, /\/dev\/pts\/\d+/, 'a real terminal')
  })

  test('resize changes the terminal size', async () => {
    const chunks = []
    const t = await sbx.pty.create({ cols: 80, rows: 24, cwd: '/tmp', onData: (d) => chunks.push(d) })
    await sbx.pty.resize(t.pid, { cols: 120, rows: 40 })
    await sbx.pty.sendInput(t.pid, new TextEncoder().encode('stty size; echo "cwd=$(pwd)"; exit\n'))
    await t.wait()
    const out = text(chunks)
    assert.match(out, /40 120/, `stty size in ${JSON.stringify(out)}`)
    assert.match(out, /cwd=\/tmp/)
  })

  test('kill ends the terminal', async () => {
    const t = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })
    assert.ok((await sbx.commands.list()).some((p) => p.pid === t.pid), 'a pty is listed with the commands')
    assert.equal(await sbx.pty.kill(t.pid), true)
    await assert.rejects(t.wait(), isExitError())
    assert.equal(await sbx.pty.kill(t.pid), false)
  })
})
