import { Migration } from '@mikro-orm/migrations';

/**
 * Real VPN servers (docs/vpn-servers.md): a server row is either `simulated` (the shared catalogue) or `agent` (a
 * host that runs the VPN agent, registered by an organization's owner and serving that organization only). A
 * connection on an agent server is a peer of its interface while `peer_enabled`; its status and usage follow the
 * agent's reports.
 */
export class Migration20261126000030_vpn_agents extends Migration {
  override name = 'Migration20261126000030_vpn_agents';

  override up(): void {
    this.addSql(`
      alter table "vpn_servers"
        add column "kind" text not null default 'simulated' check ("kind" in ('simulated', 'agent')),
        add column "organization_id" varchar(64) null references "organizations" ("id") on update cascade on delete cascade,
        add column "token_hash" varchar(64) null,
        add column "registered_at" timestamptz(3) null,
        add column "last_report_at" timestamptz(3) null,
        add column "peers_version" int not null default 0;`);
    this.addSql(
      `create unique index "vpn_servers_token_hash_unique" on "vpn_servers" ("token_hash") where "deleted_at" is null;`,
    );
    this.addSql(`create index "vpn_servers_organization_id_index" on "vpn_servers" ("organization_id");`);
    this.addSql(`
      alter table "vpn_connections"
        add column "peer_enabled" boolean not null default true,
        add column "last_handshake_at" timestamptz(3) null,
        add column "reported_rx" bigint not null default 0,
        add column "reported_tx" bigint not null default 0;`);
  }
}
