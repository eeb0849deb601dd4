import { create, toBinary, type DescFile, type DescMessage, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type ServerReflectionRequest as V1Request,
  type ServerReflectionResponse as V1Response,
  ServerReflection as V1,
  ServerReflectionResponseSchema as V1ResponseSchema,
} from "../../gen/grpc/reflection/v1/reflection_pb.js";
import {
  ServerReflection as V1Alpha,
  ServerReflectionResponseSchema as V1AlphaResponseSchema,
} from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";

type Answer = MessageInitShape<typeof V1ResponseSchema>["messageResponse"];

/** gRPC status NOT_FOUND, the error_code of an unknown file or symbol. */
const notFound = 5;
/** gRPC status INVALID_ARGUMENT, for an empty request. */
const invalidArgument = 3;

interface Schema {
  services: string[];
  fileByName: Map<string, DescFile>;
  fileBySymbol: Map<string, DescFile>;
  /** extendee type name -> extension number -> file */
  extensions: Map<string, Map<number, DescFile>>;
}

/**
 * gRPC server reflection (grpc.reflection.v1 and v1alpha: the same messages
 * under two package names) over the schema of the served services, so that
 * grpcurl and `buf curl` need no copy of proto/. It reveals only the public
 * schema and answers without a credential. `served` are the other services;
 * the two reflection services list and describe themselves too, since they
 * are served as well (docs/api.md "Protocols").
 */
export function createReflectionServices(served: readonly DescService[]) {
  const schema = indexSchema([...served, V1, V1Alpha]);
  const answer = (request: V1Request): V1Response =>
    create(V1ResponseSchema, { validHost: request.host, originalRequest: request, messageResponse: respond(schema, request) });
  async function* info(requests: AsyncIterable<V1Request>, _context: HandlerContext) {
    for await (const request of requests) yield answer(request);
  }
  const v1: Partial<ServiceImpl<typeof V1>> = { serverReflectionInfo: info };
  const v1alpha: Partial<ServiceImpl<typeof V1Alpha>> = {
    async *serverReflectionInfo(requests, context) {
      // The two packages' messages have the same fields: re-create each under the other name.
      const asV1 = (async function* () {
        for await (const request of requests) yield request as unknown as V1Request;
      })();
      for await (const response of info(asV1, context)) yield create(V1AlphaResponseSchema, response as never);
    },
  };
  return [
    { service: V1, impl: v1 },
    { service: V1Alpha, impl: v1alpha },
  ];
}

function respond(schema: Schema, request: V1Request): Answer {
  const ask = request.messageRequest;
  const files = (file: DescFile | undefined, what: string): Answer =>
    file
      ? {
          case: "fileDescriptorResponse",
          value: {
            fileDescriptorProto: withDependencies(file).map((f) =>
              toBinary(FileDescriptorProtoSchema, create(FileDescriptorProtoSchema, f.proto)),
            ),
          },
        }
      : { case: "errorResponse", value: { errorCode: notFound, errorMessage: `${what} is not part of the served schema` } };
  switch (ask.case) {
    case "listServices":
      return { case: "listServicesResponse", value: { service: schema.services.map((name) => ({ name })) } };
    case "fileByFilename":
      return files(schema.fileByName.get(ask.value), "that file");
    case "fileContainingSymbol":
      return files(schema.fileBySymbol.get(ask.value), "that symbol");
    case "fileContainingExtension":
      return files(schema.extensions.get(ask.value.containingType)?.get(ask.value.extensionNumber), "that extension");
    case "allExtensionNumbersOfType": {
      const numbers = schema.extensions.get(ask.value);
      if (!numbers && !schema.fileBySymbol.has(ask.value)) {
        return { case: "errorResponse", value: { errorCode: notFound, errorMessage: "that type is not part of the served schema" } };
      }
      return { case: "allExtensionNumbersResponse", value: { baseTypeName: ask.value, extensionNumber: [...(numbers?.keys() ?? [])] } };
    }
    default:
      return {
        case: "errorResponse",
        value: { errorCode: invalidArgument, errorMessage: "the request asks nothing: set one of its fields" },
      };
  }
}

/** The file first, then every file it imports, each once. */
function withDependencies(file: DescFile): DescFile[] {
  const seen = new Set<DescFile>();
  const visit = (f: DescFile) => {
    if (seen.has(f)) return;
    seen.add(f);
    for (const dependency of f.dependencies) visit(dependency);
  };
  visit(file);
  return [...seen];
}

function indexSchema(served: readonly DescService[]): Schema {
  const schema: Schema = { services: [], fileByName: new Map(), fileBySymbol: new Map(), extensions: new Map() };
  const files = new Set<DescFile>();
  for (const service of served) {
    if (schema.services.includes(service.typeName)) continue;
    schema.services.push(service.typeName);
    for (const file of withDependencies(service.file)) files.add(file);
  }
  const addMessage = (message: DescMessage, file: DescFile) => {
    schema.fileBySymbol.set(message.typeName, file);
    for (const nested of message.nestedMessages) addMessage(nested, file);
    for (const nested of message.nestedEnums) schema.fileBySymbol.set(nested.typeName, file);
    for (const extension of message.nestedExtensions) addExtension(extension.extendee.typeName, extension.number, file);
  };
  const addExtension = (extendee: string, number: number, file: DescFile) => {
    let numbers = schema.extensions.get(extendee);
    if (!numbers) {
      numbers = new Map();
      schema.extensions.set(extendee, numbers);
    }
    numbers.set(number, file);
  };
  for (const file of files) {
    schema.fileByName.set(file.proto.name, file);
    for (const service of file.services) {
      schema.fileBySymbol.set(service.typeName, file);
      for (const method of service.methods) schema.fileBySymbol.set(`${service.typeName}.${method.name}`, file);
    }
    for (const message of file.messages) addMessage(message, file);
    for (const enumeration of file.enums) schema.fileBySymbol.set(enumeration.typeName, file);
    for (const extension of file.extensions) addExtension(extension.extendee.typeName, extension.number, file);
  }
  return schema;
}
