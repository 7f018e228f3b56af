// cluster-key-slot ships no typings; this is its whole API (the function ioredis routes with).
declare module 'cluster-key-slot' {
  function calculateSlot(key: string | Buffer): number;
  namespace calculateSlot {
    function generateMulti(keys: (string | Buffer)[]): number;
  }
  export = calculateSlot;
}
