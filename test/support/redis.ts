import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./free-port.js";

/** Debian's redis-server (`npm test` installs it when missing: scripts/ensure-redis.mjs). */
export const redisServerPath = process.env.REDIS_SERVER_PATH ?? "/usr/bin/redis-server";

export interface TestRedis {
  url: string;
  port: number;
  /** Stops it (SIGKILL: as a crash would), keeping the port for a restart. */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>;
  /** SIGSTOP: its connections stay open, and what they send is answered only after `resume`. */
  pause(): void;
  /** SIGCONT: it answers what waited, in order. */
  resume(): void;
  stop(): Promise<void>;
}

function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("error", () => resolve(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (data) => {
      socket.destroy();
      resolve(data.toString().startsWith("+PONG"));
    });
  });
}

/** A redis-server of the test's own, on a free port, keeping nothing on disk. */
export async function startRedis(): Promise<TestRedis> {
  if (!existsSync(redisServerPath)) throw new Error(`${redisServerPath} is missing: run node scripts/ensure-redis.mjs`);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-redis-"));
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(redisServerPath, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], {
      stdio: "ignore",
    });
    const deadline = Date.now() + 10_000;
    while (!(await answersPing(port))) {
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const kill = async () => {
    const running = child;
    if (running === undefined || running.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => running.once("exit", () => resolve()));
    running.kill("SIGKILL");
    await exited;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}/0`,
    port,
    kill,
    restart: start,
    pause: () => child?.kill("SIGSTOP"),
    resume: () => child?.kill("SIGCONT"),
    async stop() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
