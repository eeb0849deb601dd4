import { randomInt } from "node:crypto";
import { createServer } from "node:net";

/**
 * Ports the tests hand to a server that binds them a moment later (a spawned
 * `gatehouse serve`, an address the README's commands must name). They are
 * drawn from 10000-31999, below the ranges the kernel hands out for
 * ephemeral ports (Linux 32768-60999, macOS and Windows 49152-65535): a port
 * that `listen(0)` found free is in that range, and any outgoing connection
 * of any process may take it before the server binds it (a CI run once
 * failed with EADDRINUSE that way). Only another test drawing the same port
 * meanwhile can still collide, one chance in tens of thousands.
 */
const lowest = 10_000;
const span = 22_000;

/** A port nobody listens on now, outside the ephemeral range. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = lowest + randomInt(span);
    if (await isFree(port)) return port;
  }
  throw new Error(`no free port found in ${lowest}-${lowest + span - 1}`);
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}
