import type { Interceptor } from "@connectrpc/connect";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { Http2Server, Http2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import type { DestinationStream } from "pino";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import { ConfigService } from "../gen/svc/v1/config_pb.js";
import { DashboardService } from "../gen/svc/v1/dashboard_pb.js";
import { GatewayService } from "../gen/svc/v1/gateway_pb.js";
import { IdentityService } from "../gen/svc/v1/identity_pb.js";
import { SecretsService } from "../gen/svc/v1/secrets_pb.js";
import { WebhooksService } from "../gen/svc/v1/webhooks_pb.js";
import { gatewayWatchOf, gatewayCredentialsOf, gatewaySecretScopeOf } from "./composition/gateway.js";
import { configManagerOf } from "./composition/config.js";
import { dashboardDirectoryOf, dashboardOf } from "./composition/dashboard.js";
import { identityOf } from "./composition/identity.js";
import { checkPlatformMasterKeys } from "./composition/master-key.js";
import { passkeysOf } from "./composition/passkeys.js";
import { createPlatform, type Platform } from "./composition/platform.js";
import { secretsOf } from "./composition/secrets.js";
import { organizationSettingsOf } from "./composition/settings.js";
import { tenancyOf } from "./composition/tenancy.js";
import { deliveryWorkerOf, webhooksOf, type DeliveryWorkerOptions } from "./composition/webhooks.js";
import type { Config } from "./config.js";
import type { GatewayCredentials } from "./domain/gateway/gateway-credentials.js";
import { loadMasterKeyring } from "./crypto/master-keys.js";
import { systemRandom, type RandomSource } from "./crypto/tokens.js";
import { systemClock, type Clock } from "./domain/clock.js";
import { DomainError } from "./domain/errors.js";
import type { Identity } from "./domain/identity/identity.js";
import { createPasswordHasher } from "./domain/identity/password-hasher.js";
import type { Tenancy, InitialCredentials } from "./domain/tenancy/tenancy.js";
import type { DeliveryWorker } from "./domain/webhooks/delivery-worker.js";
import type { Webhooks } from "./domain/webhooks/webhooks.js";
import { createConfigService } from "./handlers/config-service.js";
import { createDashboardService } from "./handlers/dashboard-service.js";
import { createGatewayService } from "./handlers/gateway-service.js";
import { createHealthService } from "./handlers/health-service.js";
import { createIdentityService, createJwksRoute } from "./handlers/identity-service.js";
import { createReflectionServices } from "./handlers/reflection-service.js";
import { createSdkRoutes } from "./handlers/sdk-routes.js";
import { createSecretsService } from "./handlers/secrets-service.js";
import { createWebhooksService } from "./handlers/webhooks-service.js";
import { acceptsPublishableKey, createAuthenticator, createAuthInterceptor } from "./interceptors/auth.js";
import { createCredentialCache } from "./interceptors/credential-cache.js";
import { createErrorInterceptor, type ErrorLogger } from "./interceptors/errors.js";
import { createPlantServer } from "./plants/plant-api.js";
import { createOpenApiRoute } from "./rest/openapi/openapi-route.js";
import { restRoutes } from "./rest/routes.js";
import { createRestShim } from "./rest/shim.js";
import { clientAddressOf } from "./server/client-address.js";
import { createConnectDoor } from "./server/connect-door.js";
import { createGrpcServer } from "./server/grpc-server.js";
import { createGrpcWebDoor } from "./server/grpc-web-door.js";
import { createPlatformHandler, PlatformResponse, type ExtraRoute } from "./server/http-server.js";
import { createLoggers, type Logger } from "./server/logger.js";
import { createMetrics } from "./server/metrics.js";
import { createObservability } from "./server/observability.js";
import { createPipeline } from "./server/pipeline.js";
import { createProcedures, type ServiceEntry } from "./server/procedures.js";
import { openDatabase, type Database } from "./storage/database.js";
import type { RpcTracer } from "./tracing/create-tracing.js";
import { createGatewayStore } from "./storage/gateway-store.js";
import { createPlantStore } from "./storage/plant-store.js";
import { createTenancyStore } from "./storage/tenancy-store.js";

export interface AppOptions {
  config: Config;
  clock?: Clock;
  random?: RandomSource;
  /** Where logs go (stdout by default); tests capture them. */
  logDestination?: DestinationStream;
  /** Interceptors to run on every call of every door, after authentication (tracing, auditing, tests). */
  interceptors?: Interceptor[];
  /** SQLite: how long a write waits for another process's write lock (an operator command's is longer than the server's). */
  databaseLockWaitMs?: number;
  /** A server span per RPC call (`gatehouse serve` with the OpenTelemetry variables: src/tracing/); default none. */
  traceRpc?: RpcTracer | undefined;
  /** The delivery worker's seams (tests: a sender, timers, jitter, lease and concurrency). */
  webhooks?: DeliveryWorkerOptions;
}

export interface Listening {
  /** Base address of the platform API, e.g. http://127.0.0.1:8080. */
  url: string;
  /** Address of the gRPC (h2c) listener. */
  grpcUrl: string;
  /** Base address of the sample plant API. */
  sampleUrl: string;
}

export interface App {
  readonly config: Config;
  readonly database: Database;
  readonly logger: Logger;
  readonly services: readonly ServiceEntry[];
  /** Initialises an empty store; null when it already was (nothing is printed twice). */
  initialize(): Promise<InitialCredentials | null>;
  tenancy: Tenancy;
  /** Webhook endpoints and deliveries (WebhooksService, the dashboard). */
  webhooks: Webhooks;
  /** This instance's delivery worker (started by listen()). */
  deliveryWorker: DeliveryWorker;
  /** Gateway keys, consumer keys and connected gateways (the operator side of the data plane). */
  gatewayCredentials: GatewayCredentials;
  /**
   * The identity domain IdentityService and the dashboard call (built on first use):
   * what it revokes is announced to every instance's gateways.
   */
  identity(): Identity;
  /** Tells every instance to stop trusting cached credentials (after a revocation written outside the API). */
  credentialsChanged(): Promise<void>;
  /** The organisation created first (by `gatehouse init` or the first start): the one the embedded gateway serves. */
  firstOrganizationId(): Promise<string | undefined>;
  listen(): Promise<Listening>;
  /** Stops accepting connections, lets requests in flight finish, closes the database. */
  close(): Promise<void>;
}

/** The composition root: storage, services, interceptors and servers (the areas' parts: src/composition). */
export async function createApp(options: AppOptions): Promise<App> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  const loggers = createLoggers(config.logLevel, options.logDestination);
  const logger = loggers.app;
  const keyring = loadMasterKeyring(config);
  const database = await openDatabase(config.database, {
    ...(options.databaseLockWaitMs !== undefined ? { lockWaitMs: options.databaseLockWaitMs } : {}),
  });
  let credentialCache: ReturnType<typeof createCredentialCache> | undefined;
  const passwordHasher = createPasswordHasher({ admission: config.signIn });
  const composed = createPlatform({
    config,
    database,
    clock,
    random,
    logger,
    serving: true,
    keyring: () => keyring,
    passwordHasher: () => passwordHasher,
    credentialsChanged: async () => credentialCache?.changed(),
  });
  const platform: Platform = composed.platform;
  try {
    // A store holding keys wrapped under a master key this process lacks is refused here, at start, by id.
    await checkPlatformMasterKeys(platform);
  } catch (error) {
    await database.close();
    throw error;
  }
  credentialCache = createCredentialCache({
    clock,
    feed: platform.feed,
    ttlMs: config.credentialCacheMs,
    maxEntries: 10_000,
  });
  const cache = credentialCache;
  platform.onClose(() => cache.close());

  const logError: ErrorLogger = (error, context) => logger.error({ err: error, procedure: context.procedure }, "request failed");
  const tenancyStore = createTenancyStore(database.client);
  const dashboard = dashboardOf(platform);
  const identity = identityOf(platform);
  const authenticator = createAuthenticator({
    store: tenancyStore,
    gatewayKeys: createGatewayStore(database.client),
    clock,
    dashboard: dashboard.authenticate,
    cache: credentialCache,
    sessionToken: (token) => identity.sessions.verifySessionToken(token),
    onTouchError: (error) => logger.warn({ err: error }, "could not record key use"),
  });
  const tenancy = tenancyOf(platform);
  const gatewayCredentials = gatewayCredentialsOf(platform);
  const webhooks = webhooksOf(platform);
  const deliveryWorker = deliveryWorkerOf(platform, options.webhooks);

  const configService = createConfigService({ config: configManagerOf(platform) });
  const secretsService = createSecretsService({ secrets: secretsOf(platform), gatewayScope: gatewaySecretScopeOf(platform) });
  const services: ServiceEntry[] = [
    { service: Health, impl: createHealthService({ pingDatabase: database.ping }) },
    { service: ConfigService, impl: configService },
    { service: SecretsService, impl: secretsService },
    { service: IdentityService, impl: createIdentityService({ identity, passkeys: passkeysOf(platform) }) },
    { service: WebhooksService, impl: createWebhooksService({ webhooks }) },
    {
      service: GatewayService,
      impl: createGatewayService({
        watch: gatewayWatchOf(platform, {
          signingKeys: async (organizationId) => (await identity.sessions.publishedKeys(organizationId)).keys,
        }),
      }),
    },
    {
      service: DashboardService,
      impl: createDashboardService({
        dashboard,
        tenancy,
        identity,
        passkeys: passkeysOf(platform),
        gateways: gatewayCredentials,
        settings: organizationSettingsOf(platform),
        directory: dashboardDirectoryOf(platform),
        config: configService,
        secrets: secretsService,
        clock,
        publicUrl: config.publicUrl,
        credentialsChanged: () => platform.credentialsChanged(),
      }),
    },
    ...dashboard.services,
  ];
  services.push(...createReflectionServices(services.map((entry) => entry.service)));
  const interceptors = [
    createErrorInterceptor(logError),
    dashboard.requestGuard,
    createAuthInterceptor(authenticator),
    ...(options.interceptors ?? []),
  ];
  const procedures = createProcedures(services, interceptors);
  const readMaxBytes = config.limits.configBody + 64 * 1024;
  const metrics = createMetrics();
  const observability = createObservability({ metrics, logRpc: loggers.rpc, logRequest: loggers.request, traceRpc: options.traceRpc });
  const pipeline = createPipeline({
    observe: (call) => observability.call(call),
    logError,
  });
  const rest = createRestShim({ pipeline, procedures, routes: restRoutes, limits: config.limits });
  const extra: ExtraRoute[] = [
    {
      label: "/metrics",
      matches: (method, path) => method === "GET" && path === "/metrics",
      async handle(_req, res) {
        const body = await metrics.text();
        res.writeHead(200, { "content-type": metrics.contentType });
        res.end(body);
      },
    },
    createJwksRoute(identity.sessions),
    createOpenApiRoute({ config, routes: restRoutes }),
    ...createSdkRoutes(),
    ...dashboard.routes,
  ];
  // The client's address: the TCP peer's, or behind a trusted proxy (TRUSTED_PROXIES) the one it forwarded.
  const clientOf = (req: IncomingMessage) =>
    clientAddressOf(req.socket.remoteAddress, req.headers["x-forwarded-for"], config.trustedProxies);
  const platformHandler = createPlatformHandler({
    logger,
    observability,
    rest,
    connect: createConnectDoor({ pipeline, readMaxBytes }),
    grpcWeb: createGrpcWebDoor({ pipeline, readMaxBytes }),
    procedures,
    extra,
    callableFromBrowser: acceptsPublishableKey,
    clientAddress: clientOf,
  });

  let servers: (Server | Http2Server)[] = [];

  return {
    config,
    database,
    logger,
    services,
    tenancy,
    webhooks,
    deliveryWorker,
    gatewayCredentials,
    identity: () => identity,
    credentialsChanged: () => platform.credentialsChanged(),
    async firstOrganizationId() {
      const [first] = await tenancyStore.listOrganizations();
      return first?.id;
    },
    async initialize() {
      try {
        return await tenancy.initialize();
      } catch (error) {
        if (error instanceof DomainError && error.reason === "already_initialized") return null;
        throw error;
      }
    },
    async listen() {
      const limits = config.transport;
      const http = createServer(
        {
          ServerResponse: PlatformResponse,
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          // Slow clients (slowloris): headers must arrive within headersTimeout, the whole request within requestTimeout,
          // checked every second rather than Node's default 30 s.
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
          connectionsCheckingInterval: 1_000,
          maxHeaderSize: 16 * 1024,
        },
        platformHandler,
      );
      http.maxConnections = limits.maxConnections;
      http.maxHeadersCount = 100;
      const grpc = trackSessions(
        createGrpcServer({
          pipeline,
          procedures,
          observability,
          limits,
          readMaxBytes,
          logError,
          // gRPC has no X-Forwarded-For: a trusted proxy in front of it is seen as the peer (per-peer limits apply to it).
          clientAddress: (peer) => clientAddressOf(peer, undefined, config.trustedProxies),
        }),
      );
      const sample = createPlantServer({ plants: createPlantStore(database.client), sessions: identity.sessions, clock, logger });
      servers = [http, grpc, sample];
      const ports = await Promise.all([
        listenOn(http, config.port, config.host),
        listenOn(grpc, config.grpcPort, config.host),
        listenOn(sample, config.samplePort, config.host),
      ]);
      // Every serving instance delivers webhooks (docs/events.md, "Delivery").
      deliveryWorker.start();
      const host = config.host.includes(":") ? `[${config.host}]` : config.host;
      return { url: `http://${host}:${ports[0]}`, grpcUrl: `http://${host}:${ports[1]}`, sampleUrl: `http://${host}:${ports[2]}` };
    },
    async close() {
      await Promise.all(servers.map((server) => closeServer(server)));
      await composed.close();
      await database.close();
      loggers.flush();
    },
  };
}

function listenOn(server: Server | Http2Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** HTTP/2 sessions of a server, so that shutdown can send them GOAWAY. */
const http2Sessions = new WeakMap<Http2Server, Set<Http2Session>>();

function trackSessions(server: Http2Server): Http2Server {
  const sessions = new Set<Http2Session>();
  http2Sessions.set(server, sessions);
  server.on("session", (session: Http2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  return server;
}

function closeServer(server: Server | Http2Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    if ("closeIdleConnections" in server) server.closeIdleConnections();
    // GOAWAY lets HTTP/2 clients finish streams in flight and open no new ones.
    for (const session of http2Sessions.get(server as Http2Server) ?? []) {
      session.close();
      // Streams in flight get a grace period; idle sessions the client keeps open do not hold shutdown.
      setTimeout(() => session.destroy(), session.closed ? 0 : 1000).unref();
    }
    // Connections still busy after the grace period are cut.
    setTimeout(() => {
      if ("closeAllConnections" in server) server.closeAllConnections();
      resolve();
    }, 10_000).unref();
  });
}
