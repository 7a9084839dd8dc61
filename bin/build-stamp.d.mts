export declare const STAMP_FILE: string;
export declare function sourceStamp(root: string): string;
export declare function builtStamp(root: string): string | null;
export declare function buildIsCurrent(root: string): boolean;
