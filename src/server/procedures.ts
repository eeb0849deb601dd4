import { create, isMessage, type DescMessage, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
import type {
  ConnectRouter,
  HandlerContext,
  Interceptor,
  StreamRequest,
  StreamResponse,
  UnaryRequest,
  UnaryResponse,
} from "@connectrpc/connect";
import { DomainError } from "../domain/errors.js";
import { callKey, type Call } from "./call.js";

/** One service and its (possibly partial) implementation. */
export interface ServiceEntry {
  service: DescService;
  // Implementations are typed per service where they are written (ServiceImpl<typeof X>).
  impl: object;
}

type Next = (req: UnaryRequest | StreamRequest) => Promise<UnaryResponse | StreamResponse>;

/** An RPC as the pipeline serves it: its descriptor, and its interceptor chain ending in the implementation. */
export interface Procedure {
  readonly service: DescService;
  readonly method: DescMethod;
  /** `/svc.v1.ConfigService/GetConfig` */
  readonly path: string;
  /** Requests enter here: the interceptors, in order, then the implementation. */
  readonly next: Next;
}

/**
 * The one routes function of the in-process test transport
 * (createRouterTransport): the same implementations and interceptors as the doors.
 */
export function createRoutes(entries: readonly ServiceEntry[], interceptors: Interceptor[]) {
  return (router: ConnectRouter) => {
    for (const { service, impl } of entries) router.service(service, impl as never, { interceptors });
  };
}

/**
 * Every RPC of the given services, by path, each with its chain built once:
 * the interceptors wrap a last step that calls the implementation with the
 * call as its HandlerContext. RPCs without an implementation answer unimplemented.
 */
export function createProcedures(entries: readonly ServiceEntry[], interceptors: readonly Interceptor[]): Map<string, Procedure> {
  const procedures = new Map<string, Procedure>();
  for (const { service, impl } of entries) {
    for (const method of service.methods) {
      const fn = (impl as Record<string, unknown>)[method.localName];
      const implementation =
        typeof fn === "function"
          ? (fn as (request: unknown, context: HandlerContext) => unknown).bind(impl)
          : () => {
              throw new DomainError("unimplemented", "not_implemented", `${service.typeName}/${method.name} is not implemented`);
            };
      let next: Next = method.methodKind === "unary" ? unaryStep(method, implementation) : streamStep(method, implementation);
      for (let i = interceptors.length - 1; i >= 0; i--) next = (interceptors[i] as Interceptor)(next);
      procedures.set(`/${service.typeName}/${method.name}`, { service, method, path: `/${service.typeName}/${method.name}`, next });
    }
  }
  return procedures;
}

function callOf(req: UnaryRequest | StreamRequest): Call {
  const call = req.contextValues.get(callKey);
  if (!call) throw new Error("a request reached the implementation without a call");
  return call;
}

function asMessage(desc: DescMessage, output: unknown): Message {
  return isMessage(output, desc) ? output : create(desc, output as Record<string, unknown>);
}

/** The answer's headers and trailers, made only if the handler or an interceptor asks. */
class CallResponse {
  readonly stream: boolean;
  constructor(
    private readonly call: Call,
    readonly message: unknown,
    stream: boolean,
  ) {
    this.stream = stream;
  }
  get service() {
    return this.call.service;
  }
  get method() {
    return this.call.method;
  }
  get header(): Headers {
    return this.call.responseHeader;
  }
  get trailer(): Headers {
    return this.call.responseTrailer;
  }
}

function unaryStep(method: DescMethod, implementation: (request: unknown, context: HandlerContext) => unknown): Next {
  return async (req) => {
    const call = callOf(req);
    const output = await implementation(req.message, call);
    return new CallResponse(call, asMessage(method.output, output), false) as unknown as UnaryResponse;
  };
}

function streamStep(method: DescMethod, implementation: (request: unknown, context: HandlerContext) => unknown): Next {
  return async (req) => {
    const call = callOf(req);
    const inputs = req.message as AsyncIterable<Message>;
    let output: unknown;
    if (method.methodKind === "server_streaming") {
      let first: Message | undefined;
      for await (const message of inputs) {
        if (first !== undefined) {
          throw new DomainError("invalid_argument", "malformed_request", `${method.name} takes exactly one request message`);
        }
        first = message;
      }
      if (first === undefined) throw new DomainError("invalid_argument", "malformed_request", `${method.name} needs a request message`);
      output = implementation(first, call);
    } else {
      output = implementation(inputs, call);
    }
    // Client streaming answers one message; the doors frame every streaming answer as a stream.
    const messages =
      method.methodKind === "client_streaming" ? single(method.output, output) : outputs(method.output, output as AsyncIterable<unknown>);
    return new CallResponse(call, messages, true) as unknown as StreamResponse;
  };
}

async function* single(desc: DescMessage, output: unknown): AsyncIterable<Message> {
  yield asMessage(desc, await output);
}

async function* outputs(desc: DescMessage, output: AsyncIterable<unknown>): AsyncIterable<Message> {
  for await (const message of output) yield asMessage(desc, message);
}
