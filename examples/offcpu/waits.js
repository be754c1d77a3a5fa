// A Node thread that waits a known time (docs/off-cpu.md): 8 waits of 125 ms in Atomics.wait,
// each through waitInSleeper(), with JavaScript frames on the stack while it is blocked.
const cell = new Int32Array(new SharedArrayBuffer(4));

function waitInSleeper() {
  for (let i = 0; i < 8; i++) {
    Atomics.wait(cell, 0, 0, 125);
  }
}

const start = process.hrtime.bigint();
waitInSleeper();
const ms = Number(process.hrtime.bigint() - start) / 1e6;
console.log(`waited ${ms.toFixed(1)} ms`);
