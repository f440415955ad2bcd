import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { isTransport, wrapTransport } from "./own-transport.js";
import { ContextdServices } from "./services.js";
import { defaultTimeout, interceptorsOf, type CallSettings } from "./settings.js";

export interface ContextdClientOptions extends CallSettings {
  /**
   * The protocol spoken with contextd's web port, over `fetch`: `"grpc-web"` (default)
   * or `"connect"`. Or a Connect `Transport` of your own (from `@connectrpc/connect-web`):
   * it knows the address, so give none.
   */
  transport?: "grpc-web" | "connect" | Transport;
}

/**
 * A connection to contextd's web port from a browser (an Office add-in's task pane, a
 * web page) or any runtime with `fetch`: the same services and errors as the Node
 * client, without Node's modules. Calls from another origin need that origin allowed on
 * the server (`--cors-origins`).
 */
export class ContextdClient extends ContextdServices {
  /** The URL of the web port; undefined with a transport of your own. */
  readonly baseUrl: string | undefined;

  /** `address`: the web port's URL (`https://…`), or `host:port` for plain HTTP. */
  constructor(address: string, options?: ContextdClientOptions);
  /** A client whose calls go through `options.transport`, a transport of your own. */
  constructor(options: ContextdClientOptions & { transport: Transport });
  constructor(addressOrOptions: string | ContextdClientOptions, maybeOptions: ContextdClientOptions = {}) {
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
      return;
    }
    if (typeof address !== "string" || address === "") {
      throw new TypeError("give the address of contextd's web port, or a transport of your own");
    }
    const baseUrl = /^https?:\/\//.test(address) ? address : `http://${address}`;
    const common = { baseUrl, defaultTimeoutMs, interceptors };
    super(
      chosen === "connect"
        ? createConnectTransport({ ...common, useBinaryFormat: true })
        : createGrpcWebTransport(common),
      defaultTimeoutMs,
    );
    this.baseUrl = baseUrl;
  }

  /** Does nothing: `fetch` keeps no connection of the client's to close. Kept so code
   * written for the Node client runs unchanged. */
  close(): void {}
}
