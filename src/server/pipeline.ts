import type { Message } from "@bufbuild/protobuf";
import { Code, ConnectError, type StreamRequest, type StreamResponse, type UnaryRequest, type UnaryResponse } from "@connectrpc/connect";
import { toConnectError, type ErrorLogger } from "../interceptors/errors.js";
import type { Call } from "./call.js";

/** What every door is built from: the pipeline, and the largest request message it reads (decoded bytes). */
export interface DoorDeps {
  pipeline: Pipeline;
  readMaxBytes: number;
}

/** What the pipeline records once per call: one metric sample and one log line (docs/api.md, "Protocols: one implementation, several front doors"). */
export type CallObserver = (call: Call) => void;

export interface PipelineDeps {
  observe: CallObserver;
  logError: ErrorLogger;
}

export type UnaryOutcome = { ok: true; message: Message } | { ok: false; error: ConnectError };
export type StreamOutcome = { ok: true; messages: AsyncIterable<Message> } | { ok: false; error: ConnectError };

/** How a door turns its request into the call's input message (framing, decoding). */
export type MessageReader<Source> = (call: Call, source: Source) => Message | Promise<Message>;

/**
 * A request as interceptors see it (UnaryRequest or StreamRequest). A class,
 * so that every call's request shares one hidden class. Its fields are its
 * own (an interceptor may copy it with a spread), except `signal`, which is
 * made only when read: an interceptor that builds a new request from this
 * one copies `signal` by name.
 */
class CallRequest {
  readonly service: Call["service"];
  readonly method: Call["method"];
  readonly requestMethod: string;
  readonly url: string;
  readonly header: Headers;
  readonly contextValues: Call["values"];
  constructor(
    private readonly call: Call,
    readonly stream: boolean,
    readonly message: unknown,
  ) {
    this.service = call.procedure.service;
    this.method = call.procedure.method;
    this.requestMethod = call.requestMethod;
    this.url = call.url;
    this.header = call.requestHeader;
    this.contextValues = call.values;
  }
  get signal(): AbortSignal {
    return this.call.signal;
  }
}

/**
 * The one request pipeline behind every door (Connect, gRPC, gRPC-Web, REST):
 *
 *   decode (the door's reader: body, Content-Encoding, codec, depth limit)
 *   -> the procedure's interceptor chain (authentication from the proto `auth`
 *      option, error translation, and any other interceptor)
 *   -> the implementation
 *   -> the answer or a ConnectError that is safe to show
 *   -> one metric sample and one log line.
 *
 * Doors only frame: they read a request into a reader's source, hand it here,
 * and write what comes back in their protocol's shape.
 */
export function createPipeline(deps: PipelineDeps) {
  function fail(call: Call, error: unknown): ConnectError {
    const connectError = toConnectError(error, call.procedure.path.slice(1), deps.logError);
    call.code = connectError.code;
    return connectError;
  }

  function observe(call: Call): void {
    if (call.observed) return;
    call.observed = true;
    deps.observe(call);
  }

  return {
    /** Runs a unary call; the outcome is counted and logged before it is returned. */
    async unary<Source>(call: Call, read: MessageReader<Source>, source: Source): Promise<UnaryOutcome> {
      try {
        const message = await read(call, source);
        const req = new CallRequest(call, false, message) as unknown as UnaryRequest;
        const res = (await call.procedure.next(req)) as UnaryResponse;
        return { ok: true, message: res.message };
      } catch (error) {
        return { ok: false, error: fail(call, error) };
      } finally {
        observe(call);
        call.finish();
      }
    },

    /**
     * Runs a streaming call. A failure before the first answer is an error
     * outcome; afterwards the messages iterable throws the ConnectError to
     * end with. The call is counted and logged when the stream ends, however
     * it ends (completion, error, or the door giving up because the client left).
     */
    async stream(call: Call, inputs: AsyncIterable<Message>): Promise<StreamOutcome> {
      let res: StreamResponse;
      try {
        const req = new CallRequest(call, true, inputs) as unknown as StreamRequest;
        res = (await call.procedure.next(req)) as StreamResponse;
      } catch (error) {
        const connectError = fail(call, error);
        observe(call);
        call.finish();
        return { ok: false, error: connectError };
      }
      const messages = res.message as AsyncIterable<Message>;
      return {
        ok: true,
        messages: (async function* () {
          let completed = false;
          try {
            yield* messages;
            completed = true;
          } catch (error) {
            throw fail(call, error);
          } finally {
            // The door stopped reading before the end: the client went away.
            if (!completed && call.code === undefined) call.code = Code.Canceled;
            observe(call);
            call.finish();
          }
        })(),
      };
    },

    /** Counts and logs a call that failed before the pipeline could run it (the door could not read the request). */
    refuse(call: Call, error: unknown): ConnectError {
      const connectError = error instanceof ConnectError && error.code !== Code.Internal ? error : fail(call, error);
      call.code = connectError.code;
      observe(call);
      return connectError;
    },
  };
}

export type Pipeline = ReturnType<typeof createPipeline>;
