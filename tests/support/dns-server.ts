import { createServer, Packet } from 'dns2';

/**
 * A DNS server of the test's own on loopback (UDP), answering TXT queries from a table the test fills: point
 * `DNS_SERVERS` at `address` and no lookup leaves the machine (docs/development.md; the system resolver is never
 * used by tests). A name without records answers NXDOMAIN.
 */
export interface TestDnsServer {
  /** `127.0.0.1:<port>`, the value for `DNS_SERVERS`. */
  address: string;
  /** TXT values per name (lower case, no trailing dot). */
  txt: Map<string, string[]>;
  /** Queries received, by name. */
  queries: string[];
  close(): Promise<void>;
}

export async function startDnsServer(): Promise<TestDnsServer> {
  const txt = new Map<string, string[]>();
  const queries: string[] = [];
  const server = createServer({
    udp: true,
    handle: (request, send) => {
      const response = Packet.createResponseFromRequest(request);
      const [question] = request.questions;
      const name = String(question?.name ?? '')
        .toLowerCase()
        .replace(/\.$/, '');
      queries.push(name);
      const values = txt.get(name);
      if (!values?.length) {
        response.header.rcode = Packet.RCODE.NXDOMAIN;
      } else if (question?.type === Packet.TYPE.TXT) {
        for (const data of values) {
          const answer = { name, type: Packet.TYPE.TXT, class: Packet.CLASS.IN, ttl: 0, data };
          response.answers.push(answer as unknown as (typeof response.answers)[number]);
        }
      }
      void send(response);
    },
  });
  const addresses = await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  return {
    address: `127.0.0.1:${addresses.udp!.port}`,
    txt,
    queries,
    close: () => server.close(),
  };
}
