import { createClient } from "@redis/client";
import { createHash } from "node:crypto";

/**
 * Rate limits shared by every gateway of an organisation (docs/gateway.md,
 * "Rate limits across gateways"), kept in Redis 7 or Valkey through
 * node-redis's core client (@redis/client: the client Redis maintains, typed,
 * with reconnection and RESP3; its core package alone, without the modules'
 * commands).
 *
 * The check and the count are one Lua script, so they are one atomic step on
 * the server: with any number of gateways and any concurrency, no window of
 * a limit's length ever admits more than its `requests`. The algorithm is the
 * one each gateway runs for itself (local-limiter.ts): per client, ten slices
 * of the window, each holding its admissions and the time of the last one,
 * released once that last admission has left the window. Time is Redis's own
 * (TIME), so gateways whose clocks disagree still count in one timeline.
 */
const script = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local slots = 11
local state = {}
for k = 1, #KEYS do
  local requests = tonumber(ARGV[2 * k - 1])
  local window = tonumber(ARGV[2 * k])
  local values = redis.call('HGETALL', KEYS[k])
  local fields = {}
  for i = 1, #values, 2 do fields[values[i]] = tonumber(values[i + 1]) end
  local total = 0
  local newest = 0
  local live = {}
  local released = {}
  for s = 0, slots - 1 do
    local count = fields['c' .. s]
    if count and count > 0 then
      local last = fields['t' .. s]
      if last + window <= now then
        table.insert(released, 'c' .. s)
        table.insert(released, 't' .. s)
      else
        total = total + count
        if last > newest then newest = last end
        table.insert(live, {last, count})
      end
    end
  end
  if #released > 0 then redis.call('HDEL', KEYS[k], unpack(released)) end
  state[k] = {requests = requests, window = window, total = total, newest = newest, live = live}
end
for k = 1, #KEYS do
  local s = state[k]
  if s.total >= s.requests then
    table.sort(s.live, function(a, b) return a[1] < b[1] end)
    local left = s.total
    local at = now + s.window
    for _, slice in ipairs(s.live) do
      left = left - slice[2]
      if left < s.requests then
        at = slice[1] + s.window
        break
      end
    end
    return {0, k, at - now, s.newest + s.window - now}
  end
end
local out = {1, 0, 0, 0}
for k = 1, #KEYS do
  local s = state[k]
  local slot = math.floor(now / (s.window / 10)) % slots
  redis.call('HINCRBY', KEYS[k], 'c' .. slot, 1)
  redis.call('HSET', KEYS[k], 't' .. slot, now)
  redis.call('PEXPIRE', KEYS[k], s.window + math.ceil(s.window / 10))
  table.insert(out, s.requests - s.total - 1)
  table.insert(out, s.window)
end
return out
`;
const scriptSha = createHash("sha1").update(script).digest("hex");

/** One limit of a request: its key (route, plugin, window, client) and its bounds. */
export interface ClusterLimit {
  readonly key: string;
  readonly requests: number;
  readonly windowMs: number;
}

/** What the cluster decided for all of a request's limits at once. */
export type ClusterDecision =
  | { readonly allowed: true; readonly remaining: readonly number[]; readonly resetMs: readonly number[] }
  | { readonly allowed: false; readonly refusedBy: number; readonly retryAfterMs: number; readonly resetMs: number };

export interface ClusterRateStore {
  /** Whether to ask Redis now: false while it is known to be unreachable (one request a second probes it). */
  usable(): boolean;
  /** Whether the connection to Redis is up (for tests and the admin port). */
  readonly ready: boolean;
  /** Checks and counts every limit in one atomic step; rejects when Redis does not answer in time. */
  take(limits: readonly ClusterLimit[]): Promise<ClusterDecision>;
  close(): Promise<void>;
}

export interface ClusterRateStoreOptions {
  /** redis://host:port/db (GATEWAY_REDIS_URL). */
  url: string;
  /** How long a check may take before the gateway counts for itself (GATEWAY_REDIS_TIMEOUT_MS, default 50). */
  timeoutMs: number;
  /** A failure or time-out: the gateway counts for itself this time. */
  onError(error: Error): void;
}

class StoreTimeout extends Error {
  override readonly name = "StoreTimeout";
}

export function createClusterRateStore(options: ClusterRateStoreOptions): ClusterRateStore {
  const client = createClient({
    url: options.url,
    // Commands fail at once while disconnected (the gateway then counts for itself) instead of queueing.
    disableOfflineQueue: true,
    socket: {
      connectTimeout: Math.max(1_000, options.timeoutMs * 20),
      reconnectStrategy: (retries: number) => Math.min(100 * 2 ** retries, 2_000),
    },
  });
  client.on("error", () => {
    // Reported per failed check (onError); the client reconnects by itself.
  });
  // The script is loaded on every (re)connection, so checks are EVALSHA from the first one on.
  client.on("ready", () => {
    client.sendCommand(["SCRIPT", "LOAD", script]).catch(() => {});
  });
  let connecting: Promise<unknown> | undefined;
  const connect = () => {
    connecting ??= client.connect().catch((error: unknown) => {
      connecting = undefined;
      throw error;
    });
    return connecting;
  };
  void connect().catch(() => {});
  /** Epoch ms before which Redis is not asked again after a failure (a probe a second). */
  let downUntil = 0;
  /** Checks in a row that Redis answered too late. */
  let lateInARow = 0;

  const run = async (limits: readonly ClusterLimit[]): Promise<ClusterDecision> => {
    if (!client.isReady) await connect();
    const keys = limits.map((l) => l.key);
    const args = limits.flatMap((l) => [String(l.requests), String(l.windowMs)]);
    let reply: unknown;
    try {
      reply = await client.sendCommand(["EVALSHA", scriptSha, String(keys.length), ...keys, ...args]);
    } catch (error) {
      if (!String((error as Error).message).startsWith("NOSCRIPT")) throw error;
      reply = await client.sendCommand(["EVAL", script, String(keys.length), ...keys, ...args]);
    }
    const values = (reply as (number | string)[]).map(Number);
    if (values[0] === 0) return { allowed: false, refusedBy: values[1]! - 1, retryAfterMs: values[2]!, resetMs: values[3]! };
    const remaining: number[] = [];
    const resetMs: number[] = [];
    for (let i = 4; i < values.length; i += 2) {
      remaining.push(values[i]!);
      resetMs.push(values[i + 1]!);
    }
    return { allowed: true, remaining, resetMs };
  };

  return {
    usable: () => Date.now() >= downUntil,
    get ready() {
      return client.isReady;
    },
    take(limits) {
      return new Promise<ClusterDecision>((resolve, reject) => {
        // The time-out's verdict waits for the poll phase of the event loop: on a busy loop the timer can
        // come due while Redis's answer is already waiting in the socket, and that answer wins.
        const timer = setTimeout(
          () => setImmediate(() => fail(new StoreTimeout(`Redis did not answer within ${options.timeoutMs} ms`), true)),
          options.timeoutMs,
        );
        let done = false;
        const fail = (error: Error, timedOut = false) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          // Unreachable: every request counts locally for a second, then one asks again. Slow: a few
          // late answers in a row before the same (one late answer under a burst is not an outage).
          lateInARow = timedOut ? lateInARow + 1 : lateInARow;
          if (!timedOut || lateInARow >= 3) downUntil = Date.now() + 1_000;
          options.onError(error);
          reject(error);
        };
        run(limits).then((decision) => {
          if (done) return; // answered after the time-out: the gateway counted for itself already
          done = true;
          clearTimeout(timer);
          downUntil = 0;
          lateInARow = 0;
          resolve(decision);
        }, fail);
      });
    },
    async close() {
      try {
        if (client.isOpen) await client.close();
      } catch {
        client.destroy();
      }
    },
  };
}
