import * as http from "node:http";
import * as https from "node:https";
import type { Transport } from "@connectrpc/connect";
import { createGrpcTransport, createGrpcWebTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { isTransport, wrapTransport } from "./own-transport.js";
import { ContextdServices } from "./services.js";
import { defaultTimeout, interceptorsOf, type CallSettings } from "./settings.js";

/** The address `contextd serve` listens on by default. */
export const DEFAULT_ADDRESS = "127.0.0.1:50151";

export interface ContextdClientOptions extends CallSettings {
  /**
   * `"grpc"` (default): gRPC over HTTP/2. `"grpc-web"`: gRPC-Web over HTTP/1.1, for
   * servers or proxies that speak only HTTP/1.1; the address is then their web port.
   * Or a Connect `Transport` of your own (gRPC, gRPC-Web or Connect, from
   * `@connectrpc/connect-node` or `@connectrpc/connect-web`): it knows the address, so
   * give none, and it stays yours to close.
   */
  transport?: "grpc" | "grpc-web" | Transport;
}

/**
 * A connection to contextd from Node. One property per service; every unary RPC
 * returns a promise and every server-streaming RPC an async iterable. Each method takes
 * the request (a plain object) and optional call options: `signal` (an AbortSignal that
 * cancels the call), `timeoutMs` (this call's deadline), `headers`. Every failure is
 * thrown as a {@link ContextdError}, which is a `ConnectError`.
 */
export class ContextdClient extends ContextdServices {
  /** The URL the client's own transport connects to; undefined with a caller's transport. */
  readonly baseUrl: string | undefined;
  private readonly closeConnection: () => void;

  /** `address` is `host:port` (plain text) or a URL (`https://` for TLS). */
  constructor(address?: string, options?: ContextdClientOptions);
  /** A client whose calls go through `options.transport`, a transport of your own. */
  constructor(options: ContextdClientOptions & { transport: Transport });
  constructor(addressOrOptions?: string | ContextdClientOptions, maybeOptions: ContextdClientOptions = {}) {
    const [address, options] =
      typeof addressOrOptions === "object" ? [undefined, addressOrOptions] : [addressOrOptions, maybeOptions];
    const defaultTimeoutMs = defaultTimeout(options);
    const interceptors = interceptorsOf(options);
    const { transport: chosen } = options;
    if (isTransport(chosen)) {
      if (address !== undefined) {
        throw new TypeError(
          "give an address or a transport of your own, not both: the transport has its address",
        );
      }
      super(wrapTransport(chosen, interceptors, defaultTimeoutMs), defaultTimeoutMs);
      this.baseUrl = undefined;
      this.closeConnection = () => {};
      return;
    }
    const target = address ?? DEFAULT_ADDRESS;
    const baseUrl = /^https?:\/\//.test(target) ? target : `http://${target}`;
    const common = { baseUrl, defaultTimeoutMs, interceptors };
    if (chosen === "grpc-web") {
      const agent = baseUrl.startsWith("https:")
        ? new https.Agent({ keepAlive: true })
        : new http.Agent({ keepAlive: true });
      super(
        createGrpcWebTransport({ ...common, httpVersion: "1.1", nodeOptions: { agent } }),
        defaultTimeoutMs,
      );
      this.closeConnection = () => agent.destroy();
    } else {
      const sessionManager = new Http2SessionManager(baseUrl);
      super(createGrpcTransport({ ...common, sessionManager }), defaultTimeoutMs);
      this.closeConnection = () => sessionManager.abort();
    }
    this.baseUrl = baseUrl;
  }

  /**
   * Closes the connection; calls still running fail with UNAVAILABLE or CANCELLED.
   * Does nothing with a transport of your own: close that yourself.
   */
  close(): void {
    this.closeConnection();
  }
}
