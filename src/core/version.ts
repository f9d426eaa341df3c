/** combine's version: package.json's, written into the bundles by esbuild (`0.0.0-dev` run from source). */
declare const __COMBINE_VERSION__: string;

export const VERSION = typeof __COMBINE_VERSION__ === 'string' ? __COMBINE_VERSION__ : '0.0.0-dev';
