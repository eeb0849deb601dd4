import { PassThrough } from "node:stream";
import { createOutput } from "../../src/cli/output.js";

/**
 * The CLI's output: progress lines only on a terminal and only for slow work,
 * errors once in text or JSON, and a closed pipe that never crashes the run.
 * (The CLI as a user runs it is tested in test/http/cli.test.ts.)
 */
function streams(tty: boolean) {
  const stdout = Object.assign(new PassThrough(), { isTTY: tty });
  const stderr = Object.assign(new PassThrough(), { isTTY: tty });
  const text = (stream: PassThrough) => {
    const chunks: Buffer[] = [];
    for (let chunk = stream.read() as Buffer | null; chunk !== null; chunk = stream.read() as Buffer | null) chunks.push(chunk);
    return Buffer.concat(chunks).toString();
  };
  return { stdout, stderr, out: () => text(stdout), err: () => text(stderr) };
}

const slow = (ms: number) => new Promise((resolve) => setTimeout(() => resolve("done"), ms));

describe("progress", () => {
  test("on a terminal, work longer than the delay shows a line on stderr, erased when it ends", async () => {
    const s = streams(true);
    const output = createOutput({ ...s, json: false, progressDelayMs: 20 });
    expect(await output.progress("initialising the data store", () => slow(120))).toBe("done");
    expect(s.err()).toBe("gatehouse: initialising the data store…\r\x1b[K");
    expect(s.out()).toBe("");
  });

  test("quick work shows nothing", async () => {
    const s = streams(true);
    const output = createOutput({ ...s, json: false, progressDelayMs: 200 });
    await output.progress("reading keys", () => slow(5));
    expect(s.err()).toBe("");
  });

  test("when stderr is not a terminal (a pipe, a file, CI logs) nothing is shown", async () => {
    const s = streams(false);
    const output = createOutput({ ...s, json: false, progressDelayMs: 1 });
    await output.progress("initialising the data store", () => slow(50));
    expect(s.err()).toBe("");
  });

  test("with --json the progress line stays off stdout", async () => {
    const s = streams(true);
    const output = createOutput({ ...s, json: true, progressDelayMs: 1 });
    await output.progress("initialising the data store", () => slow(50));
    output.result({ ok: true }, () => "ok\n");
    expect(s.out()).toBe('{\n  "ok": true\n}\n');
  });

  test("a failure of the work is passed on and the line is erased", async () => {
    const s = streams(true);
    const output = createOutput({ ...s, json: false, progressDelayMs: 1 });
    await expect(output.progress("saving", () => slow(50).then(() => Promise.reject(new Error("boom"))))).rejects.toThrow("boom");
    expect(s.err()).toBe("gatehouse: saving…\r\x1b[K");
  });
});

describe("errors", () => {
  const report = {
    code: "invalid_argument",
    message: "2 problems: a: bad; b: worse",
    violations: [
      { field: "a", description: "bad" },
      { field: "b", description: "worse" },
    ],
    exitCode: 1,
    usage: false,
  };

  test("text: the count, then one line per violation (never the summary and the list both)", () => {
    const s = streams(false);
    createOutput({ ...s, json: false }).error(report);
    expect(s.err()).toBe("gatehouse: 2 problems:\n  a: bad\n  b: worse\n");
  });

  test("--json: one line with code, message and the violations", () => {
    const s = streams(false);
    createOutput({ ...s, json: true }).error({ ...report, message: "unknown option '--x'\n(Did you mean --y?)", violations: [] });
    expect(s.err()).toBe('{"code":"invalid_argument","message":"unknown option \'--x\' (Did you mean --y?)"}\n');
  });
});

describe("a closed pipe", () => {
  test("an EPIPE on stdout is absorbed and later output is dropped", () => {
    const s = streams(false);
    const output = createOutput({ ...s, json: false });
    s.stdout.emit("error", Object.assign(new Error("write EPIPE"), { code: "EPIPE" }));
    expect(() => output.write("more\n")).not.toThrow();
    expect(s.out()).toBe("");
  });
});
