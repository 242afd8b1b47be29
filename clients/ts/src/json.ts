/** A JSON value (RFC 8259): what the schema's JSON scalar carries. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
