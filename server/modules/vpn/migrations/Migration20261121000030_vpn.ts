import { generateKeyPairSync } from 'node:crypto';
import { Migration } from '@mikro-orm/migrations';
import { newId } from '../../../lib/ids.js';

/** Key generation is inlined so this migration stays what it was when it first ran. */
function wireguardKeyPair(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  const d = Buffer.from(privateKey.export({ format: 'jwk' }).d!, 'base64url');
  d[0]! &= 248;
  d[31] = (d[31]! & 127) | 64;
  return {
    privateKey: d.toString('base64'),
    publicKey: Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64'),
  };
}

const q = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** The catalogue a new installation starts with: every region, both protocols. */
const SEED_SERVERS = [
  ['us-east', 'New York', 'United States', 'US', 'nyc-1', ['wireguard', 'openvpn'], 38, 12],
  ['us-east', 'Ashburn', 'United States', 'US', 'iad-1', ['wireguard'], 21, 15],
  ['us-west', 'San Francisco', 'United States', 'US', 'sfo-1', ['wireguard', 'openvpn'], 44, 21],
  ['ca-central', 'Montreal', 'Canada', 'CA', 'yul-1', ['wireguard', 'openvpn'], 17, 19],
  ['sa-east', 'São Paulo', 'Brazil', 'BR', 'gru-1', ['openvpn'], 29, 48],
  ['eu-west', 'Dublin', 'Ireland', 'IE', 'dub-1', ['wireguard', 'openvpn'], 33, 24],
  ['eu-west', 'London', 'United Kingdom', 'GB', 'lhr-1', ['wireguard'], 57, 22],
  ['eu-central', 'Frankfurt', 'Germany', 'DE', 'fra-1', ['wireguard', 'openvpn'], 46, 27],
  ['ap-southeast', 'Singapore', 'Singapore', 'SG', 'sin-1', ['wireguard', 'openvpn'], 25, 62],
  ['ap-northeast', 'Tokyo', 'Japan', 'JP', 'nrt-1', ['wireguard'], 31, 58],
] as const;

export class Migration20261121000030_vpn extends Migration {
  override name = 'Migration20261121000030_vpn';

  override up(): void {
    this.addSql(`
      create table "vpn_servers" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "location" varchar(32) not null,
        "city" varchar(100) not null,
        "country" varchar(100) not null,
        "country_code" varchar(2) not null,
        "host" varchar(253) not null,
        "port" int not null check ("port" between 1 and 65535),
        "openvpn_port" int not null default 1194 check ("openvpn_port" between 1 and 65535),
        "protocols" text[] not null,
        "status" text not null default 'online' check ("status" in ('online', 'offline', 'maintenance')),
        "load" int not null default 0,
        "latency" int not null default 0,
        "public_key" varchar(44) not null,
        "private_key" varchar(44) not null,
        "last_peer_index" int not null default 1,
        "deleted_at" timestamptz(3) null
      );`);
    this.addSql(
      `create index "vpn_servers_location_index" on "vpn_servers" ("location") where "deleted_at" is null;`,
    );
    this.addSql(
      `create unique index "vpn_servers_host_port_unique" on "vpn_servers" ("host", "port") where "deleted_at" is null;`,
    );
    this.addSql(`
      create table "vpn_connections" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "user_id" varchar(64) not null references "users" ("id") on update cascade,
        "server_id" varchar(64) not null references "vpn_servers" ("id") on update cascade,
        "name" varchar(100) not null,
        "location" varchar(32) not null,
        "protocol" text not null check ("protocol" in ('wireguard', 'openvpn')),
        "status" text not null default 'connecting' check ("status" in ('connecting', 'active', 'inactive', 'error')),
        "status_message" varchar(300) null,
        "auto_connect" boolean not null default false,
        "connect_generation" int not null default 1,
        "client_public_key" varchar(44) null,
        "client_address" varchar(43) null,
        "connected_at" timestamptz(3) null,
        "last_activity" timestamptz(3) null,
        "upload_bytes" bigint not null default 0,
        "download_bytes" bigint not null default 0,
        "session_upload_base" bigint not null default 0,
        "session_download_base" bigint not null default 0,
        "upload_rate" int not null default 0,
        "download_rate" int not null default 0
      );`);
    this.addSql(
      `create index "vpn_connections_owner_index" on "vpn_connections" ("organization_id", "user_id", "created_at" desc, "id" desc);`,
    );
    this.addSql(
      `create index "vpn_connections_organization_index" on "vpn_connections" ("organization_id", "created_at" desc, "id" desc);`,
    );
    this.addSql(`create index "vpn_connections_user_id_index" on "vpn_connections" ("user_id");`);
    this.addSql(`create index "vpn_connections_server_id_index" on "vpn_connections" ("server_id");`);
    this.addSql(
      `create index "vpn_connections_active_index" on "vpn_connections" ("id") where "status" = 'active';`,
    );

    const rows = SEED_SERVERS.map(([location, city, country, code, host, protocols, load, latency]) => {
      const keys = wireguardKeyPair();
      return `(${[
        q(newId('srv')),
        'now()',
        'now()',
        q(location),
        q(city),
        q(country),
        q(code),
        q(`${host}.vpn.example.net`),
        '51820',
        '1194',
        `array[${protocols.map(q).join(', ')}]::text[]`,
        q('online'),
        String(load),
        String(latency),
        q(keys.publicKey),
        q(keys.privateKey),
      ].join(', ')})`;
    });
    this.addSql(`
      insert into "vpn_servers" ("id", "created_at", "updated_at", "location", "city", "country", "country_code",
        "host", "port", "openvpn_port", "protocols", "status", "load", "latency", "public_key", "private_key")
      values ${rows.join(',\n        ')};`);
  }
}
