/**
 * Server-Sent Events from a procedure (docs/sites.md, "Sites and deployments", build logs). A procedure whose meta sets `eventStream`
 * may be asked for `Accept: text/event-stream` on `/v1`. The transport then puts an {@link EventStreamRequest} on the
 * request's context and calls the procedure as for JSON: authentication, permission, scoping and input validation
 * are the procedure's own, and any error is answered in the JSON envelope before anything is streamed. If the
 * procedure (its service) sets `open`, the transport answers `200 text/event-stream` and hands `open` the stream;
 * otherwise the JSON answer goes out as usual.
 */
export interface EventStreamRequest {
  /** The `Last-Event-ID` request header (an EventSource sends it when it reconnects), as received. */
  lastEventId: string | undefined;
  /**
   * Set by the service to stream: called once the response is committed to SSE. Returns what to do when the stream
   * ends for any reason (client gone, server closing): release listeners there.
   */
  open?: (sink: EventSink) => () => void;
}

/** One event: `id`, `event` and `data` lines (`data` is sent as JSON on one line). */
export interface StreamEvent {
  id?: string | number;
  event?: string;
  data: unknown;
}

/** Where a service writes its events. Writes after the stream ended are ignored. */
export interface EventSink {
  send(event: StreamEvent): void;
  /** Ends the response (the client may reconnect with `Last-Event-ID`). */
  close(): void;
  readonly closed: boolean;
}

/** Milliseconds between heartbeat comments on a stream (proxies close connections that stay silent too long). */
export const EVENT_STREAM_HEARTBEAT_MS = 15_000;

/** The wire form of one event. */
export function formatStreamEvent(e: StreamEvent): string {
  let out = '';
  if (e.id !== undefined) out += `id: ${String(e.id).replace(/[\r\n]/g, '')}\n`;
  if (e.event !== undefined) out += `event: ${e.event.replace(/[\r\n]/g, '')}\n`;
  // JSON.stringify escapes line breaks inside strings, so the data is always one line.
  return `${out}data: ${JSON.stringify(e.data)}\n\n`;
}

/** True when an `Accept` header asks for an event stream. */
export function acceptsEventStream(accept: string | undefined): boolean {
  return accept !== undefined && /(^|,)\s*text\/event-stream\s*(;|,|$)/i.test(accept);
}
