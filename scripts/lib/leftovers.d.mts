export declare const RUN_MARKER: string;
export declare const WORKER_MARKER: string;
export declare const canFindLeftovers: boolean;
export interface MarkedProcess {
  pid: number;
  args: string;
}
export declare function markedProcesses(name: string, value: string, except?: number[]): MarkedProcess[];
export declare function reapMarked(
  name: string,
  value: string,
  options?: { graceMs?: number; except?: number[] },
): Promise<MarkedProcess[]>;
