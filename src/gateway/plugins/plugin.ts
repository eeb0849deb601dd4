import type { ConfigValue, PluginType, RouteResource } from "../../domain/config/config-document.js";
import type { PluginSchema } from "../../domain/config/plugin-fields.js";
import type { GatewayAnswer } from "../gateway-answer.js";
import type { Exchange } from "../gateway-handler.js";
import type { HeaderRewrite } from "../proxy/upstream-headers.js";
import type { CorsPolicy } from "./cors.js";

/**
 * What a step of the request pipeline decided: go on to the next step (true),
 * the gateway has answered (false), or wait for it to be known (a session
 * verified off the cache).
 */
export type StepResult = boolean | Promise<boolean>;

/** One step of a route's pipeline: rules, a credential check, the rate limits... */
export interface Step {
  /** What the step is, for traces and logs: a plugin type, or `rules`. */
  readonly kind: string;
  run(exchange: Exchange): StepResult;
}

/**
 * The pipeline's order, whatever the route lists (docs/gateway.md, "Plugins"):
 * cors, then rules, then api-key-auth and session-auth, then rate-limit, then
 * request-headers, then the upstream.
 */
export const stages = { cors: 0, rules: 1, apiKeyAuth: 2, sessionAuth: 3, rateLimit: 4, requestHeaders: 5 } as const;

/** What compiling a plugin may use besides its config. */
export interface PluginContext {
  /** The plugin's name in the document. */
  readonly name: string;
  /** Secret values the document references, by `<environment>/<name>`. */
  readonly secrets: ReadonlyMap<string, string>;
  /** Problems that close a route (never a secret value). */
  warn(message: string, fields: Record<string, unknown>): void;
}

/** What a route being compiled collects from the plugins it lists. */
export interface RouteAssembly {
  readonly route: RouteResource;
  /** Adds a step at its stage of the pipeline. */
  addStep(stage: number, step: Step): void;
  /** Closes the route: every request gets this answer (an unresolved secret, a rule that cannot run). */
  close(answer: GatewayAnswer): void;
  /** The route's CORS policy: preflights are answered by it, before anything else. */
  setCors(policy: CorsPolicy): void;
  /** A request header never forwarded as the client sent it, in any spelling (a plugin sets, removes or reads it). */
  ownHeader(name: string): void;
  /** A request header a plugin adds to: the client's own value is kept, a variant spelling is not. */
  addedHeader(name: string): void;
  /** A header that carries the identity id of a verified session to the upstream. */
  identityHeader(name: string): void;
  rewrite(rewrite: HeaderRewrite): void;
  /**
   * State a plugin keeps across revisions (rate-limit counts): the value kept
   * under `key` by the previous revision, or a new one from `create`.
   */
  carried<T>(key: string, create: () => T): T;
  /** Clients a rate-limit plugin of a route remembers at most (undefined: the limiter's default). */
  readonly maxClientsPerLimiter: number | undefined;
  /** Whether this gateway keeps cluster-wide rate limits (it has GATEWAY_REDIS_URL). */
  readonly clusterRateLimits: boolean;
  /** Logs a fact about the configuration once per revision (not a problem that closes a route). */
  notice(message: string, fields: Record<string, unknown>): void;
}

/**
 * A plugin type, in one place: the checks of its `config` (run by the control
 * plane on every import), its compilation (once per revision at the gateway)
 * and the work it does on each request (the steps it adds to the routes that
 * list it). A new plugin is one file and one line in ./index.ts.
 */
export interface GatewayPlugin<Instance = unknown> {
  readonly type: PluginType;
  readonly schema: PluginSchema;
  /** Compiles one plugin of the document; the instance is shared by every route that lists it. */
  compile(config: Record<string, ConfigValue>, context: PluginContext): Instance;
  /** Adds the route's instances of this plugin type, in the order the route lists them. */
  attach(instances: readonly Instance[], route: RouteAssembly): void;
}
