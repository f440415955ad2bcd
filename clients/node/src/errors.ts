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

/**
 * A failed call: the gRPC status, the server's message and the rejected fields. It is a
 * `ConnectError`, so code written for Connect (`ConnectError.from(e).code`,
 * `e.findDetails(...)`) handles it as it is.
 */
export class ContextdError extends ConnectError {
  // Connect recognises its errors by the name "ConnectError" (its `instanceof` and
  // `ConnectError.from` check it, so errors pass between copies of the library): a
  // ContextdError keeps that name to stay one. `instanceof ContextdError` tells them apart.
  /** The canonical gRPC name of the code, for example `"INVALID_ARGUMENT"`. */
  readonly codeName: StatusName;
  /** Every rejected field of an INVALID_ARGUMENT, in the server's order; empty otherwise. */
  readonly violations: readonly FieldViolation[];

  /**
   * `code` is comparable with `Code` (for example `Code.NotFound`), `rawMessage` is the
   * server's message as sent, `metadata` the response headers and trailers, and
   * `details` the status details as received (read them with `findDetails`).
   */
  constructor(
    code: Code,
    rawMessage: string,
    options: {
      violations?: readonly FieldViolation[];
      metadata?: HeadersInit;
      details?: ConnectError["details"];
      cause?: unknown;
    } = {},
  ) {
    super(rawMessage, code, options.metadata, undefined, options.cause);
    this.codeName = CODE_NAMES[code] ?? "UNKNOWN";
    this.message = `${this.codeName}: ${rawMessage}`;
    this.violations = options.violations ?? [];
    this.details = options.details ?? [];
  }

  // ConnectError's own check accepts any ConnectError; this one only ContextdErrors.
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === "object" && value !== null && ContextdError.prototype.isPrototypeOf(value);
  }

  /** The paths of the rejected fields. */
  get fields(): string[] {
    return this.violations.map((violation) => violation.field);
  }

  /**
   * Any error as a ContextdError, as `ConnectError.from` makes a ConnectError of it
   * (`code` for an error that is not a ConnectError already), with the rejected fields
   * read from its details.
   */
  static override from(reason: unknown, code?: Code): ContextdError {
    if (reason instanceof ContextdError) {
      return reason;
    }
    const connectError = ConnectError.from(reason, code);
    const violations = connectError
      .findDetails(BadRequestSchema)
      .flatMap((badRequest) => badRequest.fieldViolations)
      .map(({ field, description }) => ({ field, description }));
    return new ContextdError(connectError.code, connectError.rawMessage, {
      violations,
      metadata: connectError.metadata,
      details: connectError.details,
      cause: connectError,
    });
  }
}

/**
 * Any error thrown by a call, as a ContextdError. `interrupted` is set when the
 * caller's signal was aborted (CANCELLED) or the call's deadline had passed
 * (DEADLINE_EXCEEDED): a failure the client saw itself is then reported as that,
 * whatever the transport was doing when the call was cut off (such as reading
 * half a message). A status the server sent is always kept.
 */
export function callError(error: unknown, interrupted: Interruption | undefined): ContextdError {
  if (error instanceof ContextdError) {
    return error;
  }
  const connectError = ConnectError.from(error);
  // A status the server sent arrives with its grpc-status header or trailer.
  const fromServer = connectError.metadata.has("grpc-status");
  if (interrupted !== undefined && !fromServer && connectError.code !== interrupted.code) {
    return new ContextdError(interrupted.code, interrupted.message, { cause: connectError });
  }
  return ContextdError.from(connectError);
}

/** Why the client itself ended a call. */
export interface Interruption {
  readonly code: Code.Canceled | Code.DeadlineExceeded;
  readonly message: string;
}
