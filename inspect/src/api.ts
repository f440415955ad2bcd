// The credential typed in once, kept in this tab's session storage, and the client that
// sends it with every call to this same port's Connect API.
import { ContextdClient, ContextdError } from "@contextd/client/web";

const STORED = "contextd-inspect";

export interface Credential {
  /** An API key or a token; empty on a server without authentication. */
  key: string;
  /** The user whose data is shown: empty for a user's own key (the key says who). */
  user: string;
}

export function savedCredential(): Credential | undefined {
  const saved = sessionStorage.getItem(STORED);
  if (saved === null) {
    return undefined;
  }
  try {
    const { key, user } = JSON.parse(saved) as Partial<Credential>;
    return { key: typeof key === "string" ? key : "", user: typeof user === "string" ? user : "" };
  } catch {
    return undefined;
  }
}

export function saveCredential(credential: Credential): void {
  sessionStorage.setItem(STORED, JSON.stringify(credential));
}

export function forgetCredential(): void {
  sessionStorage.removeItem(STORED);
}

export function clientFor(credential: Credential): ContextdClient {
  return new ContextdClient(location.origin, {
    transport: "connect",
    apiKey: credential.key || undefined,
    propagateTrace: false,
  });
}

/** What a failed call says to a person: the status name and the server's message. */
export function describeError(error: unknown): string {
  if (error instanceof ContextdError) {
    const fields = error.violations.map((v) => `${v.field}: ${v.description}`).join("; ");
    const refused =
      error.codeName === "UNAUTHENTICATED"
        ? " — the credential was refused; sign in again with a valid key or token"
        : "";
    return `${error.codeName}: ${error.rawMessage}${fields ? ` (${fields})` : ""}${refused}`;
  }
  return error instanceof Error ? error.message : String(error);
}

export function isRefusedCredential(error: unknown): boolean {
  return error instanceof ContextdError && error.codeName === "UNAUTHENTICATED";
}
