// Records every call that goes over the wire: the method path, the request (unary calls),
// the response or the streamed events, and the error with its decoded BadRequest details.
// The Python test asserts on this record, so it sees what the browser really received.
import { toJson, type DescMessage, type JsonValue } from "@bufbuild/protobuf";
import { ConnectError, type Interceptor } from "@connectrpc/connect";

import { BadRequestSchema } from "./gen/google/rpc/error_details_pb";

export interface FieldViolation {
  field: string;
  description: string;
}

export interface CallError {
  code: string;
  message: string;
  violations: FieldViolation[];
}

export interface CallRecord {
  method: string;
  request?: JsonValue;
  response?: JsonValue;
  events?: JsonValue[];
  error?: CallError;
}

// gRPC's status names by number (Connect's Code enum has the same numbers, other spellings).
const STATUS_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

export function describeError(reason: unknown): CallError {
  const error = ConnectError.from(reason);
  const violations = error
    .findDetails(BadRequestSchema)
    .flatMap((detail) => detail.fieldViolations)
    .map(({ field, description }) => ({ field, description }));
  return {
    code: STATUS_NAMES[error.code] ?? String(error.code),
    message: error.rawMessage,
    violations,
  };
}

function json(schema: DescMessage, message: unknown): JsonValue {
  // The interceptor's messages are typed by their method's descriptors.
  return toJson(schema, message as never);
}

async function* recordEvents<T>(
  events: AsyncIterable<T>,
  schema: DescMessage,
  record: CallRecord,
  onEnd: () => void,
): AsyncIterable<T> {
  record.events = [];
  try {
    for await (const event of events) {
      record.events.push(json(schema, event));
      yield event;
    }
    onEnd();
  } catch (reason) {
    record.error = describeError(reason);
    throw reason;
  }
}

export function recorder(calls: CallRecord[]): Interceptor {
  return (next) => async (request) => {
    const method = `/${request.service.typeName}/${request.method.name}`;
    const record: CallRecord = { method };
    if (!request.stream) {
      record.request = json(request.method.input, request.message);
    }
    calls.push(record);
    try {
      const response = await next(request);
      if (!response.stream) {
        record.response = json(response.method.output, response.message);
        return response;
      }
      // A caller that aborts mid-stream is answered by the client before the events
      // are read again, so the abort is seen only on the call's signal (which is also
      // aborted, to clean up, once the events end).
      let ended = false;
      request.signal.addEventListener("abort", () => {
        if (!ended && record.error === undefined) {
          record.error = describeError(request.signal.reason);
        }
      });
      const events = recordEvents(response.message, response.method.output, record, () => {
        ended = true;
      });
      return { ...response, message: events };
    } catch (reason) {
      record.error = describeError(reason);
      throw reason;
    }
  };
}
