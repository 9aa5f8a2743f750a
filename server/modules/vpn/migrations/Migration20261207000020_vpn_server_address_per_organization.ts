import { Migration } from '@mikro-orm/migrations';

/**
 * A server's `host:port` is unique within its organization (and within the shared catalogue), no longer across
 * organizations: registering a server never reveals, nor is blocked by, another organization's server at that
 * address (docs/vpn-servers.md).
 */
export class Migration20261207000020_vpn_server_address_per_organization extends Migration {
  override name = 'Migration20261207000020_vpn_server_address_per_organization';

  override up(): void {
    this.addSql(`drop index if exists "vpn_servers_host_port_unique";`);
    this.addSql(
      `create unique index "vpn_servers_organization_host_port_unique" on "vpn_servers" ("organization_id", "host", "port") where "deleted_at" is null and "organization_id" is not null;`,
    );
    this.addSql(
      `create unique index "vpn_servers_catalogue_host_port_unique" on "vpn_servers" ("host", "port") where "deleted_at" is null and "organization_id" is null;`,
    );
  }
}
