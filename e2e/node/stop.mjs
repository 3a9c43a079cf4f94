// Shared by the tests in this folder.
// stop ends mailsink with SIGTERM, as an operator would, and waits for it to
// drain and exit; one still running 20 s later is killed and fails the run.
export async function stop(proc, exited, output) {
  if (!proc) return;
  if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
  let timer;
  const late = new Promise((r) => (timer = setTimeout(() => r('late'), 20_000)));
  const how = await Promise.race([exited, late]);
  clearTimeout(timer);
  if (how === 'late') {
    proc.kill('SIGKILL');
    await exited;
    throw new Error(`mailsink did not exit within 20 s of SIGTERM; its last output:\n${output()}`);
  }
}
