import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema } from "./gen/google/rpc/error_details_pb.js";

/** The canonical gRPC status names, indexed by code number. */
const CODE_NAMES = [
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
] as const;

export type StatusName = (typeof CODE_NAMES)[number];

/** One request field the server rejected, from google.rpc.BadRequest. */
export interface FieldViolation {
  /** Path of the field, for example `history[3].tool_calls[0].name` or `token_budget`. */
  readonly field: string;
  readonly description: string;
}

/** A failed call: the gRPC status, the server's message and the rejected fields. */
export class ContextdError extends Error {
  override readonly name = "ContextdError";
  /** The status code number, comparable with `Code` (for example `Code.NotFound`). */
  readonly code: Code;
  /** The canonical gRPC name of the code, for example `"INVALID_ARGUMENT"`. */
  readonly codeName: StatusName;
  /** The server's message as sent, without the code prefix. */
  readonly rawMessage: string;
  /** Every rejected field of an INVALID_ARGUMENT, in the server's order; empty otherwise. */
  readonly violations: readonly FieldViolation[];
  /** Response headers and trailers of the failed call. */
  readonly metadata: Headers;

  constructor(
    code: Code,
    rawMessage: string,
    options: {
      violations?: readonly FieldViolation[];
      metadata?: Headers;
      cause?: unknown;
    } = {},
  ) {
    const codeName = CODE_NAMES[code] ?? "UNKNOWN";
    super(`${codeName}: ${rawMessage}`, { cause: options.cause });
    this.code = code;
    this.codeName = codeName;
    this.rawMessage = rawMessage;
    this.violations = options.violations ?? [];
    this.metadata = options.metadata ?? new Headers();
  }

  /** The paths of the rejected fields. */
  get fields(): string[] {
    return this.violations.map((violation) => violation.field);
  }

  /**
   * Any error thrown by a call, as a ContextdError. `interrupted` is set when the
   * caller's signal was aborted (CANCELLED) or the call's deadline had passed
   * (DEADLINE_EXCEEDED): a failure the client saw itself is then reported as that,
   * whatever the transport was doing when the call was cut off (such as reading
   * half a message). A status the server sent is always kept.
   */
  static from(error: unknown, interrupted?: Interruption): ContextdError {
    if (error instanceof ContextdError) {
      return error;
    }
    const connectError = ConnectError.from(error);
    // A status the server sent arrives with its grpc-status header or trailer.
    const fromServer = connectError.metadata.has("grpc-status");
    if (interrupted !== undefined && !fromServer && connectError.code !== interrupted.code) {
      return new ContextdError(interrupted.code, interrupted.message, { cause: connectError });
    }
    const violations = connectError
      .findDetails(BadRequestSchema)
      .flatMap((badRequest) => badRequest.fieldViolations)
      .map(({ field, description }) => ({ field, description }));
    return new ContextdError(connectError.code, connectError.rawMessage, {
      violations,
      metadata: connectError.metadata,
      cause: connectError,
    });
  }
}

/** Why the client itself ended a call. */
export interface Interruption {
  readonly code: Code.Canceled | Code.DeadlineExceeded;
  readonly message: string;
}
