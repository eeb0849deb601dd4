import { Code, ConnectError } from "@connectrpc/connect";
import type { WatchGatewayResponse } from "../../../gen/svc/v1/gateway_pb.js";
import { hashToken } from "../../crypto/tokens.js";
import type { ConfigDocument } from "../../domain/config/config-document.js";
import { readConfigDocument } from "../../domain/config/read-config-document.js";
import { createControlPlanes, isRefusal, type ControlPlaneEndpoint } from "../control-plane.js";
import type { GatewayState } from "../gateway-state.js";
import { createSecretResolver } from "../secret-resolver.js";
import { createCachePersister } from "./cache-persister.js";
import { applyEvent, knowledgeOfSnapshot, referencedVersions, stateOf, type Knowledge } from "./knowledge.js";
import { createSecretValues } from "./secret-values.js";

/** Where the follower writes its logs (a pino logger fits). Never given a secret value or a key. */
export interface FollowerLogger {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

export interface FollowerOptions {
  /** GATEHOUSE_URL: control-plane base addresses, in order of preference (a list or a comma-separated string). */
  urls: readonly string[] | string;
  /** GATEHOUSE_GATEWAY_KEY (gw_...). */
  gatewayKey: string;
  /** How this gateway is listed among the organisation's connected gateways (e.g. its host name). */
  gatewayId: string;
  /**
   * GATEWAY_CACHE: the last-known-good cache file, or a directory in which it
   * is gateway-<organization_id>.json (found again at a cold start by this
   * gateway key); undefined: no cache.
   */
  cacheFile?: string | { directory: string } | undefined;
  /** Called with every new state, in order; the data plane compiles it and swaps it in. */
  onState(state: GatewayState): void;
  logger?: FollowerLogger;
  /** Reconnection delays: exponential from initialMs to maxMs with jitter; refusedMs after the key was refused. */
  backoff?: { initialMs?: number; maxMs?: number; refusedMs?: number };
  /** How long a control plane may take to send the first message of its stream before the next one is tried. */
  answerTimeoutMs?: number;
  /** Randomness of the jitter (tests pin it). */
  random?: () => number;
  /** Current time in epoch ms, to forget revocations of expired sessions (tests move it). */
  now?: () => number;
  /** Size of the gateway's own RSA key for secrets (default 3072). */
  rsaModulusLength?: number;
}

export interface FollowerStatus {
  /** A state has been handed to onState (from the control plane or the cache file): the gateway can serve. */
  ready: boolean;
  /** Where the current state came from. */
  source: "control_plane" | "cache" | undefined;
  /** A stream to a control plane is open. */
  connected: boolean;
  /** The control plane followed (or last followed). */
  url: string | undefined;
  organizationId: string | undefined;
  revision: number | undefined;
  /** The control plane refused the gateway key (unknown, revoked, wrong kind). */
  refused: boolean;
  /** Referenced secrets (`<environment>/<name>`) without a value: their routes answer 503. */
  unresolvedSecrets: string[];
  /** When the last state was handed over. */
  lastStateAt: Date | undefined;
}

export interface Follower {
  /** Loads the cache file (a cold start serves from it at once) and starts following; resolves once following has begun. */
  start(): Promise<void>;
  /** Stops following and waits for the cache file to be written. */
  close(): Promise<void>;
  status(): FollowerStatus;
  /** The latest state handed to onState. */
  state(): GatewayState | undefined;
}

const defaultHeartbeatSeconds = 20;

/**
 * The gateway's follower: the control-plane side of the data plane. It
 * follows svc.v1.GatewayService/WatchGateway on the first control plane that
 * answers (failing over along GATEHOUSE_URL), turns every change into a new
 * immutable GatewayState, resolves the secrets the configuration references
 * with a key pair of its own, reconnects with exponential backoff and jitter,
 * resumes from its revision, and keeps a last-known-good cache file for a
 * cold start while no control plane answers.
 */
export function createFollower(options: FollowerOptions): Follower {
  const logger = options.logger ?? silentLogger;
  const endpoints = createControlPlanes({ urls: options.urls, gatewayKey: options.gatewayKey });
  const keyHash = hashToken(options.gatewayKey);
  const initialMs = options.backoff?.initialMs ?? 100;
  // A control plane that answers /readyz again is followed within this (plus jitter): well inside 5 s (docs/gateway.md, "The follower").
  const maxMs = options.backoff?.maxMs ?? 2_000;
  const refusedMs = options.backoff?.refusedMs ?? 30_000;
  const answerTimeoutMs = options.answerTimeoutMs ?? 10_000;
  const random = options.random ?? Math.random;
  const clock = options.now ?? Date.now;

  let secretValues: ReturnType<typeof createSecretValues> | undefined;
  let knowledge: Knowledge | undefined;
  let current: GatewayState | undefined;
  const status: FollowerStatus = {
    ready: false,
    source: undefined,
    connected: false,
    url: undefined,
    organizationId: undefined,
    revision: undefined,
    refused: false,
    unresolvedSecrets: [],
    lastStateAt: undefined,
  };
  let closed = false;
  let stream: AbortController | undefined;
  let wakeSleep: (() => void) | undefined;
  let running: Promise<void> | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  /** Messages and secret retries are applied one at a time, in order. */
  let queue: Promise<void> = Promise.resolve();
  const serial = (fn: () => Promise<void>) => {
    const next = queue.then(fn, fn);
    queue = next.catch(() => {});
    return next;
  };

  function validate(yaml: string, revision: number): ConfigDocument | undefined {
    try {
      return readConfigDocument(yaml).document;
    } catch (error) {
      logger.error(
        { revision, err: error instanceof Error ? error.message : String(error) },
        "configuration revision does not validate here; keeping the last good one",
      );
      return undefined;
    }
  }

  const cache = createCachePersister({
    cacheFile: options.cacheFile,
    keyHash,
    clock,
    validate,
    warn: (object, message) => logger.warn(object, message),
  });

  /** Hands the data plane a new state from what is known now. */
  function emit(): void {
    const k = knowledge;
    if (!k || !secretValues) return;
    const now = clock();
    const { state, unresolved } = stateOf(k, secretValues.values, now);
    current = state;
    status.ready = true;
    status.organizationId = k.organizationId;
    status.revision = k.revision;
    status.unresolvedSecrets = unresolved;
    status.lastStateAt = new Date(now);
    try {
      options.onState(state);
    } catch (error) {
      logger.error({ err: error instanceof Error ? error.message : String(error) }, "the data plane failed to take a new state");
    }
  }

  function persist(): void {
    if (knowledge) cache.persist(knowledge);
  }

  async function loadCache(): Promise<void> {
    const cached = await cache.load();
    if (!cached) return;
    knowledge = cached;
    status.source = "cache";
    logger.info(
      { organizationId: cached.organizationId, revision: cached.revision },
      "serving the cached configuration until a control plane answers",
    );
    emit();
  }

  /** Retrieves the referenced secrets the held values miss; tries again in a second when one could not be had. */
  async function resolveSecrets(endpoint: ControlPlaneEndpoint): Promise<void> {
    if (!knowledge || !secretValues) return;
    const complete = await secretValues.resolve(knowledge, endpoint, stream?.signal);
    if (!complete) scheduleSecretRetry(endpoint);
  }

  function scheduleSecretRetry(endpoint: ControlPlaneEndpoint): void {
    if (retryTimer || closed) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      if (closed || !status.connected || status.url !== endpoint.url) return;
      serial(async () => {
        await resolveSecrets(endpoint);
        emit();
      }).catch(() => {});
    }, 1_000);
    retryTimer.unref();
  }

  // ------------------------------------------------------------------ the stream

  /** Applies one message of the stream to what is known, then hands the data plane the new state. */
  async function apply(message: WatchGatewayResponse, endpoint: ControlPlaneEndpoint): Promise<void> {
    const event = message.event;
    switch (event.case) {
      case "snapshot": {
        const s = event.value;
        let yaml: string;
        let document: ConfigDocument | undefined;
        if (s.yaml !== undefined) {
          yaml = s.yaml;
          document = validate(s.yaml, s.revision);
        } else if (knowledge && knowledge.revision === s.revision && knowledge.organizationId === s.organizationId) {
          yaml = knowledge.yaml;
          document = knowledge.document;
        } else {
          // Not the document held (another organisation's cache, say): ask for the whole document next time.
          resync = true;
          throw new Error("the control plane sent no document for a revision this gateway does not hold");
        }
        const next = knowledgeOfSnapshot(s, yaml, document, knowledge);
        // Without a valid document and none held, there is nothing to serve.
        if (!next) throw new Error("the control plane's configuration does not validate here and no earlier one is held");
        knowledge = next;
        heartbeatSeconds = s.heartbeatSeconds > 0 ? s.heartbeatSeconds : defaultHeartbeatSeconds;
        status.source = "control_plane";
        break;
      }
      case "config": {
        const k = knowledge;
        if (!k) return;
        const document = validate(event.value.yaml, event.value.revision);
        if (!document) return;
        knowledge = {
          ...k,
          revision: event.value.revision,
          yaml: event.value.yaml,
          document,
          secrets: referencedVersions(event.value.secrets),
        };
        break;
      }
      default: {
        if (!knowledge) return;
        const { changed, secret } = applyEvent(knowledge, event);
        if (!changed) return;
        // Only a secret's new version needs a retrieve; other events change what is known in place.
        if (secret === undefined) {
          emit();
          persist();
          return;
        }
      }
    }
    // Secrets first, so a new revision is served with its secrets rather than with 503s.
    await resolveSecrets(endpoint);
    emit();
    persist();
  }

  let heartbeatSeconds = defaultHeartbeatSeconds;
  /** Set when the revision held cannot be resumed from. */
  let resync = false;

  /** Follows one control plane until its stream ends. */
  async function follow(endpoint: ControlPlaneEndpoint): Promise<"unreachable" | "ended" | "refused"> {
    const controller = new AbortController();
    stream = controller;
    const sinceRevision = resync ? undefined : knowledge?.revision;
    resync = false;
    const iterator = endpoint.watch({ gatewayId: options.gatewayId, sinceRevision }, controller.signal);
    let watchdog: NodeJS.Timeout | undefined;
    // A stream silent for three heartbeats (a half-open connection) is given up.
    const arm = (ms: number) => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => controller.abort(), ms);
      watchdog.unref();
    };
    let answered = false;
    try {
      arm(answerTimeoutMs);
      const first = await iterator.next();
      if (first.done) return "unreachable";
      answered = true;
      status.connected = true;
      status.refused = false;
      status.url = endpoint.url;
      logger.info({ url: endpoint.url }, "following the control plane");
      await serial(() => apply(first.value, endpoint));
      for (;;) {
        arm(heartbeatSeconds * 3_000 + 5_000);
        const next = await iterator.next();
        if (next.done) return "ended";
        await serial(() => apply(next.value, endpoint));
      }
    } catch (error) {
      if (closed) return "ended";
      if (isRefusal(error)) {
        status.refused = true;
        logger.error(
          { url: endpoint.url, code: Code[ConnectError.from(error).code], err: ConnectError.from(error).rawMessage },
          "the control plane refused this gateway's key; keeping the current state",
        );
        return "refused";
      }
      logger.warn(
        { url: endpoint.url, err: controller.signal.aborted ? "no message in time" : ConnectError.from(error).rawMessage },
        answered ? "lost the control plane; reconnecting" : "control plane unreachable",
      );
      return answered ? "ended" : "unreachable";
    } finally {
      clearTimeout(watchdog);
      status.connected = false;
      controller.abort();
      iterator.return?.().catch(() => {});
    }
  }

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wakeSleep = undefined;
        resolve();
      }
      wakeSleep = done;
    });
  }

  /** Exponential backoff with "equal jitter": half the delay fixed, half random, so gateways do not reconnect in lockstep. */
  function delayAfter(failures: number): number {
    const base = Math.min(maxMs, initialMs * 2 ** Math.min(failures, 20));
    return base / 2 + random() * (base / 2);
  }

  async function run(): Promise<void> {
    let failures = 0;
    while (!closed) {
      let outcome: "unreachable" | "ended" | "refused" = "unreachable";
      // Always from the first: the preferred control plane is followed again as soon as it answers.
      for (const endpoint of endpoints) {
        if (closed) return;
        outcome = await follow(endpoint);
        if (outcome !== "unreachable") break;
      }
      if (closed) return;
      if (outcome === "ended") failures = 0;
      await sleep(outcome === "refused" ? refusedMs : delayAfter(failures++));
    }
  }

  return {
    async start() {
      if (running) return;
      const resolver = await createSecretResolver(options.rsaModulusLength ? { modulusLength: options.rsaModulusLength } : {});
      secretValues = createSecretValues({ resolver, warn: (object, message) => logger.warn(object, message) });
      await loadCache();
      running = run().catch((error: unknown) => {
        logger.error({ err: error instanceof Error ? error.message : String(error) }, "the follower stopped");
      });
    },
    async close() {
      closed = true;
      clearTimeout(retryTimer);
      stream?.abort();
      wakeSleep?.();
      await running;
      await queue;
      await cache.close();
    },
    status: () => ({ ...status, unresolvedSecrets: [...status.unresolvedSecrets] }),
    state: () => current,
  };
}

const silentLogger: FollowerLogger = { info() {}, warn() {}, error() {} };
