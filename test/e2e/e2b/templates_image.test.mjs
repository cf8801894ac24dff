// Templates from registry images (issue 29): fromImage with a login and
// fromDockerfile, built from an image the Go test pushed to a registry it
// runs in-process (TestTemplateImage sets WARREN_TEST_REGISTRY; without it,
// as in TestE2BSDK, the file skips). The image is busybox: no `user`, no
// bash, no sudo.
import { test, describe, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Sandbox, Template, BuildError } from 'e2b'
import { track, killAll, runId } from './helpers.mjs'

const reg = process.env.WARREN_TEST_REGISTRY
const login = { username: process.env.WARREN_TEST_REGISTRY_USER, password: process.env.WARREN_TEST_REGISTRY_PASS }
const skip = reg ? false : 'WARREN_TEST_REGISTRY is not set (TestTemplateImage runs this file)'

after(killAll)

let ctx
before(() => {
  ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'warren-tpl-img-'))
  fs.mkdirSync(path.join(ctx, 'app'))
  fs.writeFileSync(path.join(ctx, 'app', 'hello.txt'), 'hello from the context\n')
})
after(() => fs.rmSync(ctx, { recursive: true, force: true }))

async function build(t, alias) {
  const logs = []
  try {
    await Template.build(t, alias, { onBuildLogs: (e) => logs.push(`${e.level} ${e.message}`) })
  } catch (err) {
    throw new Error(`build of ${alias} failed: ${err.message}\n${logs.join('\n')}`)
  }
  return logs
}

async function failedBuild(t, alias, want) {
  const logs = []
  await assert.rejects(Template.build(t, alias, { onBuildLogs: (e) => logs.push(e.message) }), (err) => {
    assert.ok(err instanceof BuildError, String(err))
    assert.match(err.message, want)
    return true
  })
  assert.equal(await Template.exists(alias), false, 'a failed build leaves no template')
  return logs
}

async function run(sbx, cmd) {
  const r = await sbx.commands.run(cmd)
  return r.stdout.trim()
}

describe('templates from images', { skip }, () => {
  test('fromImage with a login: the image, steps as user, env, copy', async () => {
    const alias = `img-${runId}`
    const t = Template({ fileContextPath: ctx })
      .fromImage(`${reg}/warren/busybox:1`, login)
      .setEnvs({ FROM_SDK: 'yes it is' })
      .copy('app', '/home/user/app')
      .runCmd('id -un > /home/user/who.txt && echo "$FROM_SDK" > /home/user/env.txt')
    const logs = await build(t, alias)
    assert.ok(logs.some((l) => l.includes('Pulling image')), logs.join('\n'))
    assert.ok(!logs.some((l) => l.includes(login.password)), 'the password is in the build log')
    const sbx = track(await Sandbox.create(alias))
    assert.equal(await sbx.files.read('/etc/image-marker'), 'from the registry\n')
    assert.equal(await sbx.files.read('/home/user/app/hello.txt'), 'hello from the context\n')
    assert.equal(await sbx.files.read('/home/user/who.txt'), 'user\n')
    assert.equal(await sbx.files.read('/home/user/env.txt'), 'yes it is\n')
    // The SDK runs commands with /bin/bash -l: the image has only sh.
    assert.equal(await run(sbx, 'echo "$FROM_SDK"'), 'yes it is')
    assert.equal(await run(sbx, 'id -un'), 'user')
    assert.equal(await run(sbx, 'echo "$IMAGE_VAR"'), 'from the config', "the image config's Env")
    // No sudo in the image: root-only work fails as it would in it.
    const r = await sbx.commands.run('touch /etc/nope', { user: 'user' }).catch((e) => e)
    assert.notEqual(r.exitCode, 0)
  })

  test('fromDockerfile: FROM, ENV, WORKDIR, COPY, RUN, USER, CMD', async () => {
    const alias = `imgdf-${runId}`
    const dockerfile = [
      `FROM ${reg}/public/busybox:1`,
      'ENV APP_MODE=docker',
      'WORKDIR /srv/app',
      'COPY app/hello.txt ./',
      'RUN echo "built in $(pwd) as $(id -un), $APP_MODE" > built.txt',
      'USER user',
      'CMD echo started > /tmp/started && sleep 3600',
    ].join('\n')
    const logs = await build(Template({ fileContextPath: ctx }).fromDockerfile(dockerfile), alias)
    // The same image as the first test, from another repository: its
    // digest is unpacked already.
    assert.ok(logs.some((l) => l.includes('nothing to pull')), logs.join('\n'))
    const sbx = track(await Sandbox.create(alias))
    assert.equal(await sbx.files.read('/srv/app/hello.txt'), 'hello from the context\n')
    assert.equal(await sbx.files.read('/srv/app/built.txt'), 'built in /srv/app as root, docker\n')
    assert.equal(await run(sbx, 'echo "$APP_MODE"'), 'docker')
    assert.equal(await run(sbx, 'id -un'), 'user')
    assert.equal(await run(sbx, 'cat /tmp/started'), 'started')
  })

  test('bad images: a wrong password, a missing tag, no registry, aws', async () => {
    await failedBuild(Template().fromImage(`${reg}/warren/busybox:1`, { username: login.username, password: 'wrong' }).runCmd('true'),
      `img-badpw-${runId}`, /401|UNAUTHORIZED/)
    await failedBuild(Template().fromImage(`${reg}/warren/busybox:nope`, login).runCmd('true'),
      `img-notag-${runId}`, /MANIFEST_UNKNOWN|not found/i)
    await failedBuild(Template().fromImage('127.0.0.1:1/warren/busybox:1', login).runCmd('true'),
      `img-noreg-${runId}`, /connection refused|connect/i)
    await assert.rejects(
      Template.build(Template().fromAWSRegistry(`${reg}/warren/busybox:1`, { accessKeyId: 'a', secretAccessKey: 'b', region: 'eu-west-1' }).runCmd('true'), `img-aws-${runId}`),
      /"aws" is not supported/,
    )
  })
})
