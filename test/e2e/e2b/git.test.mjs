// The SDK's git module (sandbox.git), which runs git through the process
// service: init, config, status, add, commit, branches, a remote, push and
// clone — against local repositories only (no network).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { track, killAll } from './helpers.mjs'

after(killAll)

test('git: init, configure, status, add, commit, branch, push to a local remote, clone', async () => {
  const sbx = track(await Sandbox.create())
  const repo = '/home/user/repo'
  const remote = '/home/user/remote.git'

  await sbx.git.configureUser('Warren Test', 'test@warren.invalid')
  assert.equal(await sbx.git.getConfig('user.name'), 'Warren Test')

  await sbx.git.init(repo, { initialBranch: 'main' })
  await sbx.files.write(`${repo}/a.txt`, 'hello\n')
  let status = await sbx.git.status(repo)
  assert.equal(status.currentBranch, 'main')
  assert.equal(status.hasUntracked, true)
  assert.deepEqual(status.fileStatus.map((f) => f.name), ['a.txt'])

  await sbx.git.add(repo, { all: true })
  status = await sbx.git.status(repo)
  assert.equal(status.hasStaged, true)
  assert.equal(status.stagedCount, 1)

  await sbx.git.commit(repo, 'first commit')
  status = await sbx.git.status(repo)
  assert.equal(status.isClean, true, JSON.stringify(status))
  const log = await sbx.commands.run(`git -C ${repo} log --format='%an <%ae> %s'`)
  assert.equal(log.stdout.trim(), 'Warren Test <test@warren.invalid> first commit')

  await sbx.git.createBranch(repo, 'feature')
  let branches = await sbx.git.branches(repo)
  assert.equal(branches.currentBranch, 'feature')
  assert.deepEqual([...branches.branches].sort(), ['feature', 'main'])
  await sbx.files.write(`${repo}/b.txt`, 'on feature\n')
  await sbx.git.add(repo, { files: ['b.txt'] })
  await sbx.git.commit(repo, 'feature work')
  await sbx.git.checkoutBranch(repo, 'main')
  assert.equal(await sbx.files.exists(`${repo}/b.txt`), false, 'main does not have the feature file')
  branches = await sbx.git.branches(repo)
  assert.equal(branches.currentBranch, 'main')

  await sbx.git.init(remote, { bare: true, initialBranch: 'main' })
  await sbx.git.remoteAdd(repo, 'origin', remote)
  assert.equal(await sbx.git.remoteGet(repo, 'origin'), remote)
  await sbx.git.push(repo, { remote: 'origin', branch: 'main', setUpstream: true })
  status = await sbx.git.status(repo)
  assert.equal(status.upstream, 'origin/main')
  assert.equal(status.ahead, 0)

  await sbx.git.clone(remote, { path: '/home/user/clone' })
  assert.equal(await sbx.files.read('/home/user/clone/a.txt'), 'hello\n')
  const owner = await sbx.commands.run('stat -c %U /home/user/clone/a.txt')
  assert.equal(owner.stdout.trim(), 'user', 'git runs as the default user')
})
